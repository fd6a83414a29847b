import { gzipSync } from "node:zlib";
import * as fc from "fast-check";

/*
 * gRPC and gRPC-Web carry messages in 5-byte envelopes: one flags byte (bit 0: compressed; 0x80 in
 * gRPC-Web: trailers) and a big-endian 32-bit length. These are the envelopes a correct client
 * sends and the ways a broken one gets them wrong.
 */

/** One way of putting a request message into envelopes. */
export interface Framing {
  readonly name: string;
  /** The request body and any header the framing needs (grpc-encoding). */
  frame(message: Uint8Array): { body: Uint8Array; headers: [string, string][] };
}

/** An envelope with the given flags, declaring `declaredLength` bytes (normally the data's own length). */
function envelope(flags: number, data: Uint8Array, declaredLength = data.length): Uint8Array {
  const header = Buffer.alloc(5);
  header.writeUInt8(flags, 0);
  header.writeUInt32BE(declaredLength >>> 0, 1);
  return Buffer.concat([header, data]);
}

function framing(name: string, frame: (message: Uint8Array) => Uint8Array, headers: [string, string][] = []): Framing {
  return { name, frame: (message) => ({ body: frame(message), headers }) };
}

/** Envelope framings: mostly correct, otherwise each documented way of getting it wrong. */
export const framings: fc.Arbitrary<Framing> = fc.oneof(
  { weight: 12, arbitrary: fc.constant(framing("one envelope", (m) => envelope(0, m))) },
  {
    weight: 6,
    arbitrary: fc.constantFrom(
      framing("length prefix 7 bytes too long", (m) => envelope(0, m, m.length + 7)),
      framing("length prefix 1 byte too short", (m) => envelope(0, m, Math.max(0, m.length - 1))),
      framing("envelope cut inside its header", (m) => envelope(0, m).subarray(0, 3)),
      framing("envelope cut inside its data", (m) => envelope(0, m).subarray(0, 5 + Math.floor(m.length / 2))),
      framing("declared length 4 GiB - 1", (m) => envelope(0, m, 0xffffffff)),
      framing("declared length 2 GiB", (m) => envelope(0, m, 0x80000000)),
      framing("trailing bytes after the envelope", (m) => Buffer.concat([envelope(0, m), Buffer.from([1, 2, 3])])),
      framing("compressed flag without grpc-encoding", (m) => envelope(1, m)),
      framing("compressed flag, gzip", (m) => envelope(1, gzipSync(m)), [["grpc-encoding", "gzip"]]),
      framing("compressed flag, invalid gzip", (m) => envelope(1, m), [["grpc-encoding", "gzip"]]),
      framing("compressed flag, unknown encoding", (m) => envelope(1, m), [["grpc-encoding", "br"]]),
      framing("gzip encoding, uncompressed envelope", (m) => envelope(0, m), [["grpc-encoding", "gzip"]]),
      framing("flags 0x80", (m) => envelope(0x80, m)),
      framing("flags 0xff", (m) => envelope(0xff, m)),
      framing("flags 0x02", (m) => envelope(0x02, m)),
      framing("two messages in a unary call", (m) => Buffer.concat([envelope(0, m), envelope(0, m)])),
      framing("no message", () => new Uint8Array()),
      framing("empty envelope", () => envelope(0, new Uint8Array())),
    ),
  },
);

/** gRPC-Web's response envelopes, in order; an incomplete last one is dropped. */
export function readEnvelopes(body: Uint8Array): { flags: number; data: Uint8Array }[] {
  const envelopes: { flags: number; data: Uint8Array }[] = [];
  const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  let offset = 0;
  while (offset + 5 <= bytes.length) {
    const length = bytes.readUInt32BE(offset + 1);
    if (offset + 5 + length > bytes.length) break;
    envelopes.push({ flags: bytes[offset]!, data: bytes.subarray(offset + 5, offset + 5 + length) });
    offset += 5 + length;
  }
  return envelopes;
}

/** `grpc-timeout` values: valid (digits and a unit) and not. */
export const grpcTimeout: fc.Arbitrary<string> = fc.constantFrom("1S", "1500m", "100000u", "2M", "0n", "1", "-1S", "abc", "123456789S", "1.5S", "");
