import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { CreatePaymentRequestSchema, PaymentSchema } from "../gen/paymentservice/v1/payment_pb.js";
import { newMerchant, type TestMerchant } from "./support/merchant.js";
import { runningInstance } from "./support/running.js";
import { noPolling } from "./support/service.js";
import { frame, type GrpcAnswer, grpcRaw } from "./support/wire.js";

/*
 * Connect and gRPC unary calls the port answers itself (src/transport/connect-unary.ts,
 * grpc-unary.ts) against the same calls answered by connect's own handler, on an instance started
 * with DIRECT_CALLS=false: the status, the headers a client reads, the message or the error must be
 * the same, over JSON and binary, with and without gzip or a deadline, for answers and for each kind
 * of refusal.
 */

const createPath = "/paymentservice.v1.PaymentService/CreatePayment";
const card = { cardNumber: "4242424242424242", cardExpMonth: "12", cardExpYear: "2035", cardCvc: "123" };

/** Which path answers: the port's own, or connect's handler. */
type Path = "direct" | "connect";

/** An instance of each path, on the test file's database. */
function instances(): Record<Path, { readonly url: string }> {
  return { direct: runningInstance(noPolling), connect: runningInstance({ ...noPolling, DIRECT_CALLS: "false" }) };
}

/** `a` with the fields that differ between any two payments of two merchants taken from `b`. */
function withIdsOf<T extends object>(a: T, b: T): T {
  const fields = ["paymentId", "merchantId", "profileId", "created", "modifiedAt", "clientSecret"] as const;
  return { ...a, ...Object.fromEntries(fields.map((field) => [field, (b as Record<string, unknown>)[field]])) };
}

/** How many payments `merchant` has on the instance at `url`. */
async function paymentsOf(url: string, merchant: TestMerchant): Promise<number> {
  const list = await fetch(`${url}/payments/list`, { headers: { "api-key": merchant.apiKey } });
  return ((await list.json()) as { total_count: number }).total_count;
}

interface Answer {
  readonly status: number;
  readonly header: Record<string, string>;
  readonly body: Buffer;
  /** How many payments the calling merchant has once the answer came. */
  readonly payments?: number;
}

/** The headers a client reads, without those that differ between any two answers. */
function readable(headers: Headers): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const [name, value] of headers) {
    if (
      !["date", "x-request-id", "content-length", "keep-alive", "connection", "x-ratelimit-remaining", "x-ratelimit-reset"].includes(name)
    ) {
      kept[name] = value;
    }
  }
  return kept;
}

describe("Connect unary calls answered by the port itself and by connect's handler", () => {
  const services = instances();

  async function call(
    path: Path,
    body: (merchant: TestMerchant) => string | Uint8Array,
    header: Record<string, string> = {},
  ): Promise<Answer> {
    const merchant = await newMerchant(services[path].url);
    const res = await fetch(services[path].url + createPath, {
      method: "POST",
      headers: { "content-type": "application/json", "api-key": merchant.apiKey, "accept-encoding": "identity", ...header },
      body: body(merchant),
    });
    const answer = Buffer.from(await res.arrayBuffer());
    return { status: res.status, header: readable(res.headers), body: answer, payments: await paymentsOf(services[path].url, merchant) };
  }

  /** The answer of each path to the same request, the JSON bodies without their request ids. */
  async function both(body: (merchant: TestMerchant) => string | Uint8Array, header: Record<string, string> = {}) {
    return { direct: await call("direct", body, header), connect: await call("connect", body, header) };
  }

  /** A Connect error body as JSON, with its request id checked and left out. */
  function errorOf(answer: Answer): unknown {
    const body = JSON.parse(answer.body.toString()) as { code: string; message: string; details?: { type: string; debug?: unknown }[] };
    expect(body.details?.length, JSON.stringify(body)).toBe(1);
    return { code: body.code, message: body.message, type: body.details![0]!.type };
  }

  const payment = (merchant: TestMerchant, extra: Record<string, unknown> = {}) =>
    JSON.stringify({
      amount: "1000",
      currency: "USD",
      profileId: merchant.profileId,
      confirm: true,
      paymentMethodData: { card },
      ...extra,
    });

  it("a JSON call: the same status, headers and message", async () => {
    const { direct, connect } = await both((m) => payment(m));
    expect(direct.status).toBe(200);
    expect(direct.header).toEqual(connect.header);
    const [a, b] = [direct, connect].map((answer) => JSON.parse(answer.body.toString()) as Record<string, unknown>);
    expect(a!.paymentId).not.toBe(b!.paymentId);
    expect(withIdsOf(a!, b!)).toEqual(b);
  });

  it("a binary call: the same status, headers and message", async () => {
    const binary = (m: TestMerchant) =>
      toBinary(CreatePaymentRequestSchema, create(CreatePaymentRequestSchema, { amount: 1000n, currency: "USD", profileId: m.profileId }));
    const { direct, connect } = await both(binary, { "content-type": "application/proto" });
    expect(direct.status).toBe(200);
    expect(direct.header).toEqual(connect.header);
    expect(direct.header["content-type"]).toBe("application/proto");
    const [a, b] = [direct, connect].map((answer) => fromBinary(PaymentSchema, answer.body));
    expect(a!.paymentId).not.toBe(b!.paymentId);
    expect(withIdsOf(a!, b!)).toEqual(b);
  });

  it("a client that accepts gzip gets the message gzipped by both, as connect does over a kilobyte", async () => {
    const { direct, connect } = await both((m) => payment(m, { description: "x".repeat(1000) }), { "accept-encoding": "gzip" });
    expect(direct.status, direct.body.toString()).toBe(200);
    expect(direct.header["content-encoding"]).toBe("gzip");
    expect(direct.header).toEqual(connect.header);
    // fetch undoes the gzip on its own, as a Connect client does.
    expect(JSON.parse(direct.body.toString()).description).toBe("x".repeat(1000));
  });

  it("a call with a deadline: the same status, headers and message", async () => {
    const { direct, connect } = await both((m) => payment(m), { "connect-timeout-ms": "60000" });
    expect(direct.status).toBe(200);
    expect(direct.header).toEqual(connect.header);
    const [a, b] = [direct, connect].map((answer) => JSON.parse(answer.body.toString()) as Record<string, unknown>);
    expect(withIdsOf(a!, b!)).toEqual(b);
  });

  for (const [name, timeout, status] of [
    ["a deadline already passed", "0", 504],
    ["a deadline connect refuses", "12345678901", 400],
  ] as const) {
    it(`${name}: the same documented error, and no payment`, async () => {
      const { direct, connect } = await both((m) => payment(m), { "connect-timeout-ms": timeout });
      expect(direct.status).toBe(status);
      expect(direct.status).toBe(connect.status);
      expect(errorOf(direct)).toEqual(errorOf(connect));
      expect([direct.payments, connect.payments]).toEqual([0, 0]);
    });
  }

  for (const [name, body, contentType] of [
    ["a body that is not JSON", () => "{not json", "application/json"],
    ["an unknown field", (m: TestMerchant) => payment(m, { surprise: 1 }), "application/json"],
    ["a field of the wrong type", (m: TestMerchant) => payment(m, { amount: { much: true } }), "application/json"],
    ["bytes that are not UTF-8", () => Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), "application/json"],
    ["a binary body that is not a protobuf message", () => Buffer.from([0x0a, 0xff, 0xff]), "application/proto"],
  ] as const) {
    it(`${name}: the same documented refusal`, async () => {
      const { direct, connect } = await both(body as (m: TestMerchant) => string | Uint8Array, { "content-type": contentType });
      expect(direct.status).toBe(400);
      expect(direct.status).toBe(connect.status);
      expect(errorOf(direct)).toEqual(errorOf(connect));
    });
  }

  it("a refusal of the call itself (an amount out of range): the same error from the same interceptors", async () => {
    const { direct, connect } = await both((m) => payment(m, { amount: "-5" }));
    expect(direct.status).toBe(400);
    expect(direct.status).toBe(connect.status);
    expect(errorOf(direct)).toEqual(errorOf(connect));
  });

  it("a message over the 1 MiB limit, sent without its length: 413 and the same refusal", async () => {
    const big = (m: TestMerchant) => {
      const text = payment(m, { description: "y".repeat(1024 * 1024) });
      // A stream, so no Content-Length tells either path the size before it is read.
      return new ReadableStream({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(text));
          controller.close();
        },
      }) as unknown as string;
    };
    const answers = await Promise.all(
      (["direct", "connect"] as const).map(async (path) => {
        const merchant = await newMerchant(services[path].url);
        const res = await fetch(services[path].url + createPath, {
          method: "POST",
          headers: { "content-type": "application/json", "api-key": merchant.apiKey },
          body: big(merchant),
          duplex: "half",
        } as RequestInit);
        return { status: res.status, header: readable(res.headers), body: Buffer.from(await res.arrayBuffer()) };
      }),
    );
    expect(answers[0]!.status).toBe(413);
    expect(answers[1]!.status).toBe(413);
    expect(errorOf(answers[0]!)).toEqual(errorOf(answers[1]!));
  });
});

describe("gRPC unary calls answered by the port itself and by connect's handler", () => {
  const services = instances();

  async function both(body: (merchant: TestMerchant) => Uint8Array, header: Record<string, string> = {}) {
    const call = async (path: Path) => {
      const merchant = await newMerchant(services[path].url);
      const answer = await grpcRaw(services[path].url, createPath, body(merchant), { "api-key": merchant.apiKey, ...header });
      return { ...answer, payments: await paymentsOf(services[path].url, merchant) };
    };
    return { direct: await call("direct"), connect: await call("connect") };
  }

  const message = (merchant: TestMerchant, fields: Record<string, unknown> = {}) =>
    toBinary(
      CreatePaymentRequestSchema,
      create(CreatePaymentRequestSchema, { amount: 1000n, currency: "USD", profileId: merchant.profileId, ...fields }),
    );

  /** What a client reads of an answer: status, message and documented code, and the headers it may act on. */
  const outcome = (answer: GrpcAnswer) => ({
    httpStatus: answer.httpStatus,
    grpcStatus: answer.grpcStatus,
    message: answer.message,
    code: answer.detail?.code,
    contentType: answer.headers.get("content-type"),
    encoding: answer.headers.get("grpc-encoding"),
  });

  it("a call: the same status, headers and message", async () => {
    const { direct, connect } = await both((m) => frame(message(m)));
    expect(outcome(direct)).toEqual(outcome(connect));
    expect(direct.grpcStatus).toBe(0);
    const [a, b] = [direct, connect].map((answer) => {
      expect(answer.messages).toHaveLength(1);
      return fromBinary(PaymentSchema, answer.messages[0]!.data);
    });
    expect(a!.paymentId).not.toBe(b!.paymentId);
    expect(withIdsOf(a!, b!)).toEqual(b);
  });

  it("a call with a deadline: the same status, headers and message", async () => {
    const { direct, connect } = await both((m) => frame(message(m)), { "grpc-timeout": "60S" });
    expect(outcome(direct)).toEqual(outcome(connect));
    expect(direct.grpcStatus).toBe(0);
    const [a, b] = [direct, connect].map((answer) => fromBinary(PaymentSchema, answer.messages[0]!.data));
    expect(withIdsOf(a!, b!)).toEqual(b);
  });

  for (const [name, timeout, grpcStatus] of [
    ["a deadline already passed", "0n", 4],
    ["a deadline connect refuses", "1000", 3],
  ] as const) {
    it(`${name}: the same documented error, and no payment`, async () => {
      const { direct, connect } = await both((m) => frame(message(m)), { "grpc-timeout": timeout });
      expect(direct.grpcStatus).toBe(grpcStatus);
      expect(outcome(direct)).toEqual(outcome(connect));
      expect([direct.payments, connect.payments]).toEqual([0, 0]);
    });
  }

  it("a client that accepts gzip gets a message over a kilobyte gzipped by both", async () => {
    const { direct, connect } = await both((m) => frame(message(m, { description: "x".repeat(1000) })), {
      "grpc-accept-encoding": "gzip",
    });
    expect(outcome(direct)).toEqual(outcome(connect));
    expect(direct.headers.get("grpc-encoding")).toBe("gzip");
    expect(direct.messages.map((m) => m.flags)).toEqual([1]);
  });

  for (const [name, body] of [
    ["a refusal of the call itself (an amount out of range)", (m: TestMerchant) => frame(message(m, { amount: -5n }))],
    ["no message at all", () => new Uint8Array()],
    ["a frame cut short", (m: TestMerchant) => frame(message(m)).subarray(0, 8)],
    ["a frame longer than it says", (m: TestMerchant) => Buffer.concat([frame(message(m)), Buffer.from([1])])],
    ["two messages", (m: TestMerchant) => Buffer.concat([frame(message(m)), frame(message(m))])],
    ["a frame flagged compressed without grpc-encoding", (m: TestMerchant) => frame(message(m), 1)],
    ["bytes that are not a protobuf message", () => frame(Buffer.from([0x0a, 0xff, 0xff]))],
  ] as const) {
    it(`${name}: the same documented refusal`, async () => {
      const { direct, connect } = await both(body);
      expect(direct.grpcStatus).not.toBe(0);
      expect(outcome(direct)).toMatchObject({ ...outcome(connect), contentType: expect.any(String) });
    });
  }
});
