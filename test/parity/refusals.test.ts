import { gzipSync } from "node:zlib";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/paymentservice/v1/error_pb.js";
import { CreatePaymentRequestSchema, PaymentService, RetrievePaymentRequestSchema } from "../../gen/paymentservice/v1/payment_pb.js";
import { frame, grpcRaw } from "../support/wire.js";
import { startStubServer, type StubServer } from "./stub-server.js";

/*
 * The port answers the common Connect and gRPC unary calls itself (src/transport/connect-unary.ts,
 * grpc-unary.ts) and every other call through connect's handler; a compressed call is never a common
 * one. So a refusal sent plain and the same refusal sent gzipped cross both paths, and must come back
 * alike: the status, the Connect or gRPC code, the message and the documented code. (Answers cross
 * both paths in parity.test.ts, whose gzip ways take connect's handler.)
 */

let server: StubServer;
beforeAll(async () => {
  server = await startStubServer([PaymentService]);
});
afterAll(() => server.close());

const createPath = "/paymentservice.v1.PaymentService/CreatePayment";
const retrievePath = "/paymentservice.v1.PaymentService/RetrievePayment";
const payment = { amount: "1000", currency: "USD", profileId: "pro_parity" };

/** What a Connect client reads of a refusal. */
async function connectRefusal(path: string, body: Uint8Array, header: Record<string, string>) {
  const res = await fetch(server.url + path, { method: "POST", headers: header, body });
  const error = (await res.json()) as { code: string; message: string; details?: { type: string; value: string }[] };
  const detail = error.details?.find((d) => d.type === ErrorDetailSchema.typeName);
  return {
    status: res.status,
    code: error.code,
    message: error.message,
    documentedCode: detail === undefined ? undefined : fromBinary(ErrorDetailSchema, Buffer.from(detail.value, "base64")).code,
  };
}

describe("Connect unary refusals, answered by the port and by connect's handler", () => {
  const json = "application/json";
  const cases: [string, string, string | Uint8Array, string, Record<string, string>?][] = [
    ["a body that is not JSON", createPath, "{not json", json],
    ["an unknown field", createPath, JSON.stringify({ ...payment, surprise: 1 }), json],
    ["a field of the wrong type", createPath, JSON.stringify({ ...payment, amount: { much: true } }), json],
    ["bytes that are not UTF-8", createPath, new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]), json],
    ["a binary body that is not a protobuf message", createPath, new Uint8Array([0x0a, 0xff, 0xff]), "application/proto"],
    ["text PostgreSQL cannot hold (the request rules)", createPath, JSON.stringify({ ...payment, description: "a\u0000b" }), json],
    ["an empty path-bound id (the request rules)", retrievePath, JSON.stringify({ paymentId: "" }), json],
    ["a deadline already passed", createPath, JSON.stringify(payment), json, { "connect-timeout-ms": "0" }],
  ];

  it.each(cases)("%s: the same documented refusal", async (_, path, body, contentType, extra = {}) => {
    const bytes = typeof body === "string" ? new TextEncoder().encode(body) : body;
    const header = { "content-type": contentType, ...extra };
    const direct = await connectRefusal(path, bytes, header);
    const viaConnect = await connectRefusal(path, gzipSync(bytes), { ...header, "content-encoding": "gzip" });
    expect(direct.status).toBeGreaterThanOrEqual(400);
    expect(direct.documentedCode).toMatch(/^[A-Z]{2}_\d{2}$/);
    expect(direct).toEqual(viaConnect);
  });
});

describe("gRPC unary refusals, answered by the port and by connect's handler", () => {
  const createMessage = toBinary(CreatePaymentRequestSchema, create(CreatePaymentRequestSchema, { amount: 1000n, currency: "USD" }));
  const cases: [string, string, Uint8Array[], Record<string, string>?][] = [
    ["bytes that are not a protobuf message", createPath, [new Uint8Array([0x0a, 0xff, 0xff])]],
    ["two messages", createPath, [createMessage, createMessage]],
    ["no message at all", createPath, []],
    [
      "an empty path-bound id (the request rules)",
      retrievePath,
      [toBinary(RetrievePaymentRequestSchema, create(RetrievePaymentRequestSchema, { paymentId: "" }))],
    ],
    ["a deadline already passed", createPath, [createMessage], { "grpc-timeout": "0n" }],
  ];

  it.each(cases)("%s: the same documented refusal", async (_, path, messages, extra = {}) => {
    const read = async (body: Uint8Array, header: Record<string, string>) => {
      const answer = await grpcRaw(server.url, path, body, header);
      return { httpStatus: answer.httpStatus, grpcStatus: answer.grpcStatus, message: answer.message, code: answer.detail?.code };
    };
    const direct = await read(Buffer.concat(messages.map((m) => frame(m))), extra);
    const viaConnect = await read(Buffer.concat(messages.map((m) => frame(gzipSync(m), 1))), { ...extra, "grpc-encoding": "gzip" });
    expect(direct.grpcStatus).not.toBe(0);
    expect(direct.code).toMatch(/^[A-Z]{2}_\d{2}$/);
    expect(direct).toEqual(viaConnect);
  });
});

describe("unary bodies only the port's own paths see", () => {
  it("a Connect message over the 1 MiB limit, sent without its length: 413 and the documented refusal", async () => {
    const text = JSON.stringify({ ...payment, description: "y".repeat(1024 * 1024) });
    const res = await fetch(server.url + createPath, {
      method: "POST",
      headers: { "content-type": "application/json" },
      // A stream, so no Content-Length tells the port the size before it reads.
      body: new ReadableStream({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(text));
          controller.close();
        },
      }),
      duplex: "half",
    } as RequestInit);
    const error = (await res.json()) as { code: string; message: string };
    // HTTP's own status for it, as REST answers; the Connect code stays invalid_argument (IR_06).
    expect({ status: res.status, code: error.code }).toEqual({ status: 413, code: "invalid_argument" });
    expect(error.message).toMatch(/1 MiB|1048576|limit/);
  });

  const createMessage = toBinary(CreatePaymentRequestSchema, create(CreatePaymentRequestSchema, { amount: 1000n, currency: "USD" }));
  it.each([
    ["a frame cut short", frame(createMessage).subarray(0, 8)],
    ["a frame longer than it says", Buffer.concat([frame(createMessage), Buffer.from([1])])],
    ["a frame flagged compressed without grpc-encoding", frame(createMessage, 1)],
  ])("gRPC, %s: handed to connect's handler as read, and refused in the documented shape", async (_, body) => {
    const answer = await grpcRaw(server.url, createPath, body);
    expect({ grpcStatus: answer.grpcStatus, code: answer.detail?.code }).toEqual({ grpcStatus: 3, code: "IR_06" });
    expect(answer.message).toMatch(/frame|compress/);
  });
});
