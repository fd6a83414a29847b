import { gzipSync } from "node:zlib";
import * as fc from "fast-check";
import { frame } from "../support/wire.js";

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

function framing(name: string, build: (message: Uint8Array) => Uint8Array, headers: [string, string][] = []): Framing {
  return { name, frame: (message) => ({ body: build(message), headers }) };
}

/** Envelope framings: mostly correct, otherwise each documented way of getting it wrong. */
export const framings: fc.Arbitrary<Framing> = fc.oneof(
  { weight: 12, arbitrary: fc.constant(framing("one envelope", (m) => frame(m))) },
  {
    weight: 6,
    arbitrary: fc.constantFrom(
      framing("length prefix 7 bytes too long", (m) => frame(m, 0, m.length + 7)),
      framing("length prefix 1 byte too short", (m) => frame(m, 0, Math.max(0, m.length - 1))),
      framing("envelope cut inside its header", (m) => frame(m).subarray(0, 3)),
      framing("envelope cut inside its data", (m) => frame(m).subarray(0, 5 + Math.floor(m.length / 2))),
      framing("declared length 4 GiB - 1", (m) => frame(m, 0, 0xffffffff)),
      framing("declared length 2 GiB", (m) => frame(m, 0, 0x80000000)),
      framing("trailing bytes after the envelope", (m) => Buffer.concat([frame(m), Buffer.from([1, 2, 3])])),
      framing("compressed flag without grpc-encoding", (m) => frame(m, 1)),
      framing("compressed flag, gzip", (m) => frame(gzipSync(m), 1), [["grpc-encoding", "gzip"]]),
      framing("compressed flag, invalid gzip", (m) => frame(m, 1), [["grpc-encoding", "gzip"]]),
      framing("compressed flag, unknown encoding", (m) => frame(m, 1), [["grpc-encoding", "br"]]),
      framing("gzip encoding, uncompressed envelope", (m) => frame(m), [["grpc-encoding", "gzip"]]),
      framing("flags 0x80", (m) => frame(m, 0x80)),
      framing("flags 0xff", (m) => frame(m, 0xff)),
      framing("flags 0x02", (m) => frame(m, 0x02)),
      framing("two messages in a unary call", (m) => Buffer.concat([frame(m), frame(m)])),
      framing("no message", () => new Uint8Array()),
      framing("empty envelope", () => frame(new Uint8Array())),
    ),
  },
);

/** `grpc-timeout` values: valid (digits and a unit) and not. */
export const grpcTimeout: fc.Arbitrary<string> = fc.constantFrom(
  "1S",
  "1500m",
  "100000u",
  "2M",
  "0n",
  "1",
  "-1S",
  "abc",
  "123456789S",
  "1.5S",
  "",
);
