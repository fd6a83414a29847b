import { gzipSync } from "node:zlib";
import * as fc from "fast-check";

/*
 * Damage done to an already serialised body: what a broken client, a truncating proxy or an
 * attacker sends instead of what the schema describes.
 */

/** A function from a well-formed body to a damaged one; its name appears in reproducers and statistics. */
export interface BodyMutation {
  readonly name: string;
  apply(body: Uint8Array): Uint8Array;
}

const encoder = new TextEncoder();

function mutation(name: string, apply: (body: Uint8Array) => Uint8Array): BodyMutation {
  return { name, apply };
}

/** Cut a body at `fraction` of its length. */
function truncation(fraction: number): BodyMutation {
  return mutation(`truncated at ${Math.round(fraction * 100)}%`, (body) => body.subarray(0, Math.floor(body.length * fraction)));
}

function concat(...parts: Uint8Array[]): Uint8Array {
  return Buffer.concat(parts);
}

/** Damage to JSON text: bytes that are not UTF-8, duplicate keys, truncation, garbage, BOM, empty, not JSON. */
export const jsonTextMutation: fc.Arbitrary<BodyMutation> = fc.oneof(
  fc
    .tuple(
      fc.double({ min: 0, max: 1, noNaN: true }),
      fc.constantFrom([0xff], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xe2, 0x82]),
    )
    .map(([where, bytes]) =>
      mutation(`invalid UTF-8 ${Buffer.from(bytes).toString("hex")}`, (body) => {
        // Inside a string value when there is one, where a decoder must look at it.
        const text = Buffer.from(body);
        const quote = text.indexOf(0x22, Math.floor(text.length * where) + 1);
        const at = quote < 0 ? Math.floor(text.length * where) : quote + 1;
        return concat(text.subarray(0, at), Uint8Array.from(bytes), text.subarray(at));
      }),
    ),
  fc.constantFrom("amount", "currency", "customer_id", "metadata", "payment_id", "limit").map((key) =>
    mutation(`duplicate key ${key}`, (body) => {
      const text = Buffer.from(body).toString("utf8");
      return text.startsWith("{") ? encoder.encode(`{"${key}":1,"${key}":"two",${text.slice(1)}`) : body;
    }),
  ),
  fc.double({ min: 0, max: 0.99, noNaN: true }).map(truncation),
  fc
    .constantFrom("}", "]]", " garbage", "\u0000", "{}", ",", "\n\n{", "\\")
    .map((garbage) => mutation(`trailing ${JSON.stringify(garbage)}`, (body) => concat(body, encoder.encode(garbage)))),
  fc.constant(mutation("BOM", (body) => concat(Uint8Array.from([0xef, 0xbb, 0xbf]), body))),
  fc.constant(mutation("UTF-16 BOM", (body) => concat(Uint8Array.from([0xff, 0xfe]), body))),
  fc.constant(mutation("empty", () => new Uint8Array())),
  fc
    .constantFrom(
      "amount=1000&currency=USD",
      "<xml/>",
      "undefined",
      "{'a':1}",
      '{"a":1,}',
      "[1,]",
      "\u0000\u0000",
      '{"a":"\\x41"}',
      '{"a":"\\ud800"}',
      '{"a":"\\u00"}',
    )
    .map((text) => mutation(`not JSON ${JSON.stringify(text)}`, () => encoder.encode(text))),
);

/** Damage to a binary protobuf message: truncation, flipped bits, random bytes, garbage, deep nesting. */
export const protobufMutation: fc.Arbitrary<BodyMutation> = fc.oneof(
  fc.double({ min: 0, max: 0.99, noNaN: true }).map(truncation),
  fc.array(fc.nat(), { minLength: 1, maxLength: 8 }).map((positions) =>
    mutation(`bits flipped at ${positions.join(",")}`, (body) => {
      const copy = Uint8Array.from(body);
      for (const position of positions) {
        if (copy.length > 0) copy[position % copy.length]! ^= 1 << (position % 8);
      }
      return copy;
    }),
  ),
  fc
    .uint8Array({ minLength: 1, maxLength: 256 })
    .map((bytes) => mutation(`random bytes ${Buffer.from(bytes.subarray(0, 16)).toString("hex")}…`, () => bytes)),
  fc
    .uint8Array({ minLength: 1, maxLength: 32 })
    .map((bytes) => mutation(`garbage appended ${Buffer.from(bytes).toString("hex")}`, (body) => concat(body, bytes))),
  fc
    .constantFrom(1, 2, 3, 7)
    .map((field) =>
      mutation(`invalid UTF-8 in field ${field}`, (body) => concat(body, Uint8Array.from([(field << 3) | 2, 3, 0xff, 0xc0, 0x80]))),
    ),
  fc.integer({ min: 1_000, max: 100_000 }).map((depth) =>
    mutation(`${depth} nested groups`, (body) => {
      // Field 15 start-group tags, then as many end-group tags: a decoder that skips unknown groups
      // recursively recurses once per level.
      const nested = new Uint8Array(depth * 2);
      nested.fill(0x7b, 0, depth);
      nested.fill(0x7c, depth);
      return concat(body, nested);
    }),
  ),
  fc
    .integer({ min: 100, max: 20_000 })
    .map((depth) => mutation(`${depth} nested length-delimited fields`, (body) => concat(body, nestedLengthDelimited(depth)))),
  fc.constantFrom(
    mutation("length prefix beyond the end", (body) => concat(body, Uint8Array.from([0x12, 0xff, 0xff, 0xff, 0xff, 0x0f]))),
    mutation("11-byte varint", (body) =>
      concat(body, Uint8Array.from([0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])),
    ),
    mutation("field number 0", (body) => concat(body, Uint8Array.from([0x00, 0x01]))),
    mutation("wire type 6", (body) => concat(body, Uint8Array.from([0x0e, 0x01]))),
    mutation("stray end-group", (body) => concat(body, Uint8Array.from([0x0c]))),
  ),
);

/**
 * Field 1 holding field 1 holding field 1…, outermost first. Each level's length covers every level
 * inside it, so the levels are written from the inside out in one pass.
 */
function nestedLengthDelimited(depth: number): Uint8Array {
  const headers: Uint8Array[] = [];
  let inner = 0;
  for (let level = 0; level < depth; level++) {
    const header = concat(Uint8Array.from([0x0a]), varint(inner));
    headers.push(header);
    inner += header.length;
  }
  return concat(...headers.reverse());
}

function varint(value: number): Uint8Array {
  const bytes: number[] = [];
  let rest = value;
  while (rest > 0x7f) {
    bytes.push((rest & 0x7f) | 0x80);
    rest = Math.floor(rest / 128);
  }
  bytes.push(rest);
  return Uint8Array.from(bytes);
}

let bomb: Uint8Array | undefined;

/** 64 MiB of zeros in about 64 KB of gzip, made once: a decoder must stop at its size limit, not inflate it all. */
function gzipBomb(): Uint8Array {
  bomb ??= gzipSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 });
  return bomb;
}

/** A `content-encoding`/`grpc-encoding: gzip` body: really gzipped, or bytes that only claim to be. */
export const gzipBody: fc.Arbitrary<BodyMutation> = fc.oneof(
  { weight: 4, arbitrary: fc.constant(mutation("gzipped", (body) => gzipSync(body))) },
  { weight: 1, arbitrary: fc.constant(mutation("gzip bomb", gzipBomb)) },
  fc.constant(mutation("gzip truncated", (body) => gzipSync(body).subarray(0, 12))),
  fc.constant(mutation("not gzip", (body) => body)),
  fc.constant(mutation("gzip header only", () => Uint8Array.from([0x1f, 0x8b, 0x08, 0x00]))),
);
