import type { DescMessage, Message, MessageShape } from "@bufbuild/protobuf";

/** An answer of a REST route other than JSON, for a client whose Accept header asks for it: a report as CSV. */
export interface Rendering {
  /** The media type of the text, parameters included (`text/csv; charset=utf-8`). */
  readonly mediaType: string;
  render(message: Message): string;
}

/** The renderings the REST routes offer, by the type name of the output message each renders. */
export type Renderings = ReadonlyMap<string, Rendering>;

/** The rendering of `schema`'s messages as `mediaType`, keyed for `Renderings`. */
export function renderingOf<Desc extends DescMessage>(
  schema: Desc,
  mediaType: string,
  render: (message: MessageShape<Desc>) => string,
): [string, Rendering] {
  return [schema.typeName, { mediaType, render: (message) => render(message as MessageShape<Desc>) }];
}

/** A media range of an Accept header, and its weight. */
interface Range {
  readonly type: string;
  readonly q: number;
}

function rangesOf(accept: string): Range[] {
  return accept.split(",").map((part) => {
    const [type = "", ...params] = part.split(";").map((piece) => piece.trim().toLowerCase());
    const weight = params.find((param) => param.startsWith("q="));
    const q = weight === undefined ? 1 : Number(weight.slice(2));
    return { type, q: Number.isFinite(q) ? q : 0 };
  });
}

/**
 * Whether `accept` asks for `mediaType` rather than JSON: it names the type itself (a wildcard is not
 * asking: JSON stays the answer to `*\/*`) with a weight above zero and at least JSON's. JSON's weight
 * is that of the most specific range matching it.
 */
export function asksFor(accept: string | undefined, mediaType: string): boolean {
  if (accept === undefined) return false;
  const ranges = rangesOf(accept);
  const wanted = mediaType.split(";")[0]!.trim().toLowerCase();
  const named = ranges.find((range) => range.type === wanted);
  if (named === undefined || named.q <= 0) return false;
  const json = ["application/json", "application/*", "*/*"]
    .map((type) => ranges.find((range) => range.type === type))
    .find((r) => r !== undefined);
  return json === undefined || named.q >= json.q;
}
