import type { DescField } from "@bufbuild/protobuf";
import * as fc from "fast-check";
import { jsonTextMutation } from "./byte-mutations.js";
import { printable, type FuzzRequest } from "./fuzz-request.js";
import type { Header, HeaderArbitraries } from "./header-arbitraries.js";
import { nonObjectJson, type JsonBodies } from "./json-body-arbitraries.js";
import { cardNumbersIn } from "./card-numbers.js";
import { jsonText, RawJson, type JsonTree } from "./json-text.js";
import { percentEncode } from "./percent-encoding.js";
import type { ApiSchema, RestRoute } from "./schema.js";
import { deeplyNested, hostileText, misplacedCardNumber, type FieldValues } from "./value-arbitraries.js";

/** A request body and the card numbers it carries in card_number fields. */
interface Body {
  readonly bytes: Uint8Array | undefined;
  readonly cardNumbers: readonly string[];
}

/** A path segment, and what kind of id it is when not a plausible one. */
interface Segment {
  readonly text: string;
  readonly hostile: string | undefined;
}

const noBody: Body = { bytes: undefined, cardNumbers: [] };

/** `undefined` most of the time, the value now and then. */
function rarely<T>(arbitrary: fc.Arbitrary<T>, oneIn: number): fc.Arbitrary<T | undefined> {
  return fc.oneof({ weight: oneIn - 1, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary });
}

/**
 * Path ids that are not ids: empty, broken or overlong percent-encoding, encoded surrogates, dot
 * segments, extra slashes, unicode, 10,000 characters, a card number.
 */
const hostilePathId: fc.Arbitrary<{ text: string; kind: string }> = fc.oneof(
  fc
    .constantFrom(
      "",
      "%00",
      "%",
      "%zz",
      "%C0%80",
      "%ED%A0%80",
      "%F4%90%80%80",
      "..",
      ".",
      "%2e%2e",
      "a/b",
      "a//b",
      "/",
      "%2F",
      "list",
      "+",
      "a%20b",
      "%u0041",
      "~",
    )
    .map((text) => ({ text, kind: JSON.stringify(text) })),
  hostileText.map((text) => ({ text: percentEncode(text), kind: "hostile text" })),
  fc.constant({ text: "a".repeat(10_000), kind: "10,000 characters" }),
  misplacedCardNumber.map((text) => ({ text, kind: "card number" })),
);

/** Whole-URL damage, by name: targets a router or URL parser may not expect at all. */
const urlMangling: fc.Arbitrary<{ name: string; apply: (target: string) => string }> = fc.constantFrom(
  { name: "//", apply: () => "//" },
  { name: "//%", apply: () => "//%" },
  { name: "//@", apply: () => "//@" },
  { name: "/\\", apply: () => "/\\" },
  { name: "*", apply: () => "*" },
  { name: "absolute-form", apply: (target: string) => `http://x${target}` },
  { name: "// prefix", apply: (target: string) => `//${target}` },
  { name: "trailing /", apply: (target: string) => `${target}/` },
  { name: "trailing //", apply: (target: string) => `${target}//` },
  { name: "fragment", apply: (target: string) => `${target}#fragment` },
  { name: "/%2e%2e prefix", apply: (target: string) => `/%2e%2e${target}` },
  { name: "/. prefix", apply: (target: string) => `/.${target}` },
  { name: "upper case", apply: (target: string) => target.toUpperCase() },
  { name: "matrix parameter", apply: (target: string) => `${target};jsessionid=1` },
  { name: "backslashes", apply: (target: string) => target.replace(/\//g, "\\") },
);

/**
 * REST requests for every route the protos declare, built from the route's template and its input
 * message: real and broken path ids, query parameters or JSON bodies, methods, headers.
 */
export class RestArbitraries {
  constructor(
    private readonly schema: ApiSchema,
    private readonly values: FieldValues,
    private readonly bodies: JsonBodies,
    private readonly headers: HeaderArbitraries,
  ) {}

  /** A request to any route, each route equally likely. */
  request(): fc.Arbitrary<FuzzRequest> {
    return fc.oneof(...this.schema.routes.map((route) => this.routeRequest(route)));
  }

  private routeRequest(route: RestRoute): fc.Arbitrary<FuzzRequest> {
    const segments = fc.tuple(
      ...route.segments.map((s) =>
        "literal" in s ? fc.constant<Segment>({ text: s.literal, hostile: undefined }) : this.pathId(s.variable),
      ),
    );
    return fc
      .record({
        segments,
        query: route.takesBody ? rarely(fc.constantFrom("?limit=10", "?", "?a=1"), 20).map((q) => q ?? "") : this.query(route),
        body: route.takesBody
          ? this.body(route)
          : fc.oneof({ weight: 12, arbitrary: fc.constant(noBody) }, { weight: 1, arbitrary: this.body(route) }),
        httpMethod: fc.oneof(
          { weight: 14, arbitrary: fc.constant(route.httpMethod) },
          { weight: 1, arbitrary: fc.constantFrom("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "FOO") },
        ),
        mangle: rarely(urlMangling, 25),
        contentType: fc.oneof(
          { weight: 12, arbitrary: fc.constant<Header[]>([["content-type", "application/json"]]) },
          {
            weight: 2,
            arbitrary: fc.constantFrom<Header[]>(
              [],
              [["content-type", "text/plain"]],
              [["content-type", "application/x-www-form-urlencoded"]],
              [["content-type", "application/grpc"]],
              [["content-type", "application/json; charset=utf-16"]],
              [["content-type", "multipart/form-data; boundary=x"]],
              [["content-type", ""]],
              [
                ["content-type", "application/json"],
                ["content-type", "text/plain"],
              ],
            ),
          },
        ),
        credentials: this.headers.credentials(route.method),
        idempotency: this.headers.idempotency,
        extra: rarely(
          fc.constantFrom<Header[]>(
            [["content-encoding", "gzip"]],
            [["accept", "application/xml"]],
            [["connection", "close"]],
            [["expect", "100-continue"]],
            [["x-http-method-override", "DELETE"]],
          ),
          20,
        ),
      })
      .map(({ segments: parts, query, body, httpMethod, mangle, contentType, credentials, idempotency, extra }) => {
        const path = `/${parts.map((p) => p.text).join("/")}`;
        const target = mangle === undefined ? path + query : mangle.apply(path + query);
        // The label names what made the request unusual, so statistics and violation kinds tell
        // a route's ordinary failures from those of a mangled URL or a hostile id.
        const variations = [
          ...(mangle === undefined ? [] : [`URL ${mangle.name}`]),
          ...(httpMethod === route.httpMethod ? [] : [`method ${httpMethod}`]),
          ...parts.flatMap((p) => (p.hostile === undefined ? [] : [`id ${p.hostile}`])),
        ];
        const headers = [...credentials, ...idempotency, ...(body.bytes === undefined ? [] : contentType), ...(extra ?? [])];
        return printable({
          protocol: "rest",
          label: `${route.httpMethod} ${route.template}${variations.length === 0 ? "" : ` [${variations.join(", ")}]`}`,
          variant: variations[0],
          method: route.method,
          // Any variation may reach another route: a dot segment or slash after normalisation, an id
          // that is another route's literal ("list"), another method on the same path.
          pathMangled: variations.length > 0,
          cardNumbers: body.cardNumbers,
          answeredAs: "rest",
          wire: { kind: "http1", method: httpMethod, target, headers, body: body.bytes },
        });
      });
  }

  /** A path variable: usually an id of a real object of the right kind, otherwise anything. */
  private pathId(field: DescField): fc.Arbitrary<Segment> {
    return fc.oneof(
      { weight: 10, arbitrary: this.values.text(field.name).map((id): Segment => ({ text: percentEncode(id), hostile: undefined })) },
      { weight: 3, arbitrary: hostilePathId.map(({ text, kind }): Segment => ({ text, hostile: kind })) },
    );
  }

  /**
   * The query string of a bodiless route: its input fields by proto name with values of every kind
   * as text, unknown and repeated parameters, broken percent-encoding.
   */
  private query(route: RestRoute): fc.Arbitrary<string> {
    const bound = new Set(route.segments.flatMap((s) => ("variable" in s ? [s.variable.name] : [])));
    const fields = route.method.input.fields.filter((f) => !bound.has(f.name));
    const param = fc.oneof(
      ...fields.map((field) => ({
        weight: 8,
        arbitrary: fc.tuple(fc.constant(field.name), this.queryValue(field)).map(([k, v]) => `${k}=${percentEncode(v)}`),
      })),
      ...route.segments.flatMap((s) =>
        "variable" in s
          ? [{ weight: 1, arbitrary: this.values.text(s.variable.name).map((v) => `${s.variable.name}=${percentEncode(v)}`) }]
          : [],
      ),
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          "unknown=1",
          "limit",
          "=x",
          "&",
          "metadata[order]=1",
          "limit=1&limit=2",
          "%zz=1",
          "limit=%",
          "limit=%00",
          "created_gte=%ZZ",
          "__proto__=1",
        ),
      },
    );
    return fc.array(param, { maxLength: 5 }).map((params) => (params.length === 0 ? "" : `?${params.join("&")}`));
  }

  /** A query value: the text form of a plausible JSON value, or hostile text. */
  private queryValue(field: DescField): fc.Arbitrary<string> {
    return fc.oneof(
      { weight: 6, arbitrary: this.bodies.plausible(field, "rest", 0).map(queryText) },
      {
        weight: 2,
        arbitrary: fc.oneof(hostileText, fc.constantFrom("1.5", "-1", "0", "1e300", "9007199254740993", "abc", "TRUE", "null", "[]", "{}")),
      },
    );
  }

  /** A JSON body of the route's input message, whole or damaged, or JSON that is not an object. */
  private body(route: RestRoute): fc.Arbitrary<Body> {
    const tree = fc.oneof(
      { weight: 100, arbitrary: this.bodies.message(route.method.input, "rest") },
      { weight: 4, arbitrary: nonObjectJson },
      { weight: 4, arbitrary: deeplyNested },
      {
        weight: 1,
        arbitrary: fc
          .integer({ min: 1_040_000, max: 1_060_000 })
          .map((size): JsonTree => new RawJson(`{"description":"${"d".repeat(size)}"}`)),
      },
    );
    return fc.tuple(tree, rarely(jsonTextMutation, 7)).map(([json, mutation]) => {
      const bytes = Buffer.from(jsonText(json), "utf8");
      return { bytes: mutation === undefined ? bytes : mutation.apply(bytes), cardNumbers: cardNumbersIn(json) };
    });
  }
}

/** How a JSON value reads as a query parameter. */
function queryText(value: JsonTree): string {
  if (value instanceof RawJson) return value.text;
  if (typeof value === "string") return value;
  if (value === null || typeof value !== "object") return String(value);
  return jsonText(value);
}
