import { create, toBinary } from "@bufbuild/protobuf";
import { Code, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { beforeAll, describe, expect, it } from "vitest";
import { CustomerService } from "../gen/paymentservice/v1/customer_pb.js";
import { HealthService } from "../gen/paymentservice/v1/health_pb.js";
import {
  CaptureMethod,
  CapturePaymentRequestSchema,
  CreatePaymentRequestSchema,
  ListPaymentsRequestSchema,
  PaymentService,
  PaymentStatus,
} from "../gen/paymentservice/v1/payment_pb.js";
import { rest, rpcClient, type RpcProtocol } from "./support/clients.js";
import { expectExactRestError, expectRestError, expectRpcError } from "./support/errors.js";
import { onFileDatabase, onPostgres } from "./support/database.js";
import { issueKey, newMerchant, type TestMerchant } from "./support/merchant.js";
import { runningInstance, runningService } from "./support/running.js";
import { startInstance } from "./support/service.js";
import { frame, grpcRaw, grpcWebRaw, rawHttp1, type GrpcAnswer } from "./support/wire.js";

/*
 * The reproducers of "no request can crash the service or be misread": requests an attacker or a
 * careless client sends, each answered with the documented error of its protocol (never a 5xx,
 * never a dead process), and refused before it can change anything. The property-based suite in
 * test/fuzz/ looks for more; whatever it finds lands here as a plain test.
 */

const service = runningService();
let merchant: TestMerchant;
let publishableKey: string;

beforeAll(async () => {
  merchant = await newMerchant(service.url);
  publishableKey = await issueKey(service.url, merchant.merchantId, "sandbox", "publishable");
});

const call = (method: string, path: string, options: { body?: unknown; rawBody?: string; apiKey?: string; admin?: boolean } = {}) =>
  rest(service.url, method, path, { apiKey: merchant.apiKey, ...options });

/** The service still answers, so nothing a test sent took it down. */
async function expectAlive(): Promise<void> {
  expect((await call("GET", "/health")).status).toBe(200);
}

const paymentsOfMerchant = async (): Promise<number> => (await call("GET", "/payments/list")).body.total_count as number;

const grpcProcedure = "/paymentservice.v1.HealthService/Check";

/** The documented gRPC refusal: status 3 (invalid_argument) with an IR_06 ErrorDetail. */
function expectGrpcInvalid(answer: GrpcAnswer, mentions?: string): void {
  expect({ http: answer.httpStatus, grpc: answer.grpcStatus, code: answer.detail?.code }).toEqual({
    http: 200,
    grpc: Code.InvalidArgument,
    code: "IR_06",
  });
  if (mentions !== undefined) expect(answer.detail?.message).toContain(mentions);
}

describe("1. a request target new URL() cannot parse", () => {
  // One instance whatever the topology: raw request lines for this process's own parser; a load
  // balancer in front parses them itself and answers the malformed ones with its own page.
  const service = runningInstance();
  // A merchant of its own: on the embedded database each instance has a database of its own.
  let merchant: TestMerchant;
  beforeAll(async () => {
    merchant = await newMerchant(service.url);
  });

  it.each(["GET", "POST", "DELETE", "PUT"])("%s //, //% and //@ are 404 IR_02, and the service keeps serving", async (method) => {
    for (const path of ["//", "//%", "//@"]) {
      const res = await rawHttp1(service.url, `${method} ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
      expect(res.status, path).toBe(404);
      expect(res.json).toMatchObject({ error: { code: "IR_02", type: "invalid_request" } });
    }
    await expectAlive();
  });

  it("a target that is no path at all (`*`, a broken absolute URL) is 400 IR_06", async () => {
    for (const target of ["*", "http://[/customers"]) {
      const res = await rawHttp1(service.url, `GET ${target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
      expect(res.status, target).toBe(400);
      expect(res.json).toMatchObject({ error: { code: "IR_06" } });
    }
    await expectAlive();
  });

  it.each(["1.0", "1.1"])(
    "an RPC over HTTP/%s without a Host header, or with one that is no host, is 400 IR_06 in Connect's shape, and the service keeps serving",
    async (version) => {
      for (const host of ["", "Host: [\r\n"]) {
        const res = await rawHttp1(
          service.url,
          `POST ${grpcProcedure} HTTP/${version}\r\n${host}content-type: application/json\r\napi-key: ${merchant.apiKey}\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}`,
        );
        expect(res.status).toBe(400);
        expect(res.json).toMatchObject({ code: "invalid_argument", message: expect.stringContaining("Host") });
      }
      await expectAlive();
    },
  );

  it("an error to a HEAD request has no body, so the client reads the next answer rightly", async () => {
    const res = await rawHttp1(service.url, "HEAD \\payments HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    expect(res.status).toBe(400);
    expect(res.text.endsWith("\r\n\r\n")).toBe(true);
  });
});

describe("2. text PostgreSQL cannot hold, on every route", () => {
  const nul = "a\u0000b";
  const lone = "\ud800";

  it.each([
    ["customers", "POST", "/customers", (text: string) => ({ name: text }), "name"],
    ["customer metadata keys", "POST", "/customers", (text: string) => ({ metadata: { [text]: "x" } }), "metadata"],
    [
      "payments",
      "POST",
      "/payments",
      (text: string) => ({ amount: 100, currency: "USD", profile_id: merchant.profileId, description: text }),
      "description",
    ],
    [
      "payment metadata values",
      "POST",
      "/payments",
      (text: string) => ({ amount: 100, currency: "USD", profile_id: merchant.profileId, metadata: { k: text } }),
      "metadata.k",
    ],
    ["refunds", "POST", "/refunds", (text: string) => ({ payment_id: text }), "payment_id"],
    [
      "payouts",
      "POST",
      "/payouts/create",
      (text: string) => ({ amount: 100, currency: "USD", profile_id: merchant.profileId, payout_type: "bank", name: text }),
      "name",
    ],
    ["api keys", "POST", "/api-keys", (text: string) => ({ name: text }), "name"],
    ["list filters", "POST", "/payments/list", (text: string) => ({ customer_id: text }), "customer_id"],
  ])("%s: NUL and an unpaired surrogate are 400 IR_06 naming the field, and nothing is written", async (_, method, path, body, field) => {
    const before = await paymentsOfMerchant();
    for (const text of [nul, lone, "\udc00x"]) {
      expectExactRestError(await call(method, path, { body: body(text) }), 400, "IR_06", field);
    }
    expect(await paymentsOfMerchant()).toBe(before);
  });

  it("admin routes too: a merchant name, a profile name", async () => {
    for (const text of [nul, lone]) {
      expectExactRestError(await call("POST", "/merchants", { admin: true, body: { merchant_name: text } }), 400, "IR_06", "merchant_name");
      expectExactRestError(
        await call("POST", `/merchants/${merchant.merchantId}/profiles`, { admin: true, body: { profile_name: text } }),
        400,
        "IR_06",
        "profile_name",
      );
    }
  });

  it("a query parameter holding NUL is 400 IR_06 naming it", async () => {
    expectExactRestError(await call("GET", "/payments/list?customer_id=a%00b"), 400, "IR_06", "customer_id");
  });

  it.each([
    ["POST", "/customers/pay_%00", "customer_id"],
    ["GET", "/payments/a%00b", "payment_id"],
    ["POST", "/payments/a%00b/capture", "payment_id"],
  ])("a path id holding %%00 (%s %s) is 400 IR_06 naming the field", async (method, path, field) => {
    expectExactRestError(await call(method, path, method === "POST" ? { body: {} } : {}), 400, "IR_06", field);
  });

  it.each(["connect", "grpc", "grpc-web"] as const)("over %s: NUL in a field is invalid_argument IR_06 naming it", async (protocol) => {
    const customers = rpcClient(CustomerService, service.url, protocol, { apiKey: merchant.apiKey });
    const message = await expectRpcError(customers.createCustomer({ name: nul }), Code.InvalidArgument, "IR_06");
    expect(message).toContain("name");
    const inMap = await expectRpcError(customers.createCustomer({ metadata: { note: nul } }), Code.InvalidArgument, "IR_06");
    expect(inMap).toContain("metadata.note");
  });

  it.each([
    ["gRPC", grpcRaw, "application/grpc+json"],
    ["gRPC-Web", grpcWebRaw, "application/grpc-web+json"],
  ] as const)(
    "%s JSON with an unpaired surrogate in an unknown key is IR_06, not a status connect cannot encode",
    async (_, send, contentType) => {
      const body = frame(Buffer.from('{"n\\ud800me":"x"}'));
      expectGrpcInvalid(
        await send(service.url, "/paymentservice.v1.CustomerService/CreateCustomer", body, {
          "api-key": merchant.apiKey,
          "content-type": contentType,
        }),
        "key",
      );
    },
  );

  it("Connect JSON that is not UTF-8 is 400 IR_06, not read with replacement characters", async () => {
    const res = await fetch(`${service.url}/paymentservice.v1.CustomerService/CreateCustomer`, {
      method: "POST",
      headers: { "content-type": "application/json", "api-key": merchant.apiKey },
      body: Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toContain("UTF-8");
  });

  it("a REST body that is not UTF-8 is 400 IR_06", async () => {
    const res = await fetch(`${service.url}/customers`, {
      method: "POST",
      headers: { "content-type": "application/json", "api-key": merchant.apiKey },
      body: Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xff]), Buffer.from('"}')]),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain("UTF-8");
  });

  it("Connect JSON with an unpaired surrogate is invalid_argument IR_06 naming the field", async () => {
    const res = await fetch(`${service.url}/paymentservice.v1.CustomerService/CreateCustomer`, {
      method: "POST",
      headers: { "content-type": "application/json", "api-key": merchant.apiKey },
      body: '{"address":{"city":"\\ud800"}}',
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { code: string; message: string };
    expect(body.code).toBe("invalid_argument");
    expect(body.message).toContain("address.city");
  });
});

describe("3. bodies connect cannot read are the caller's mistake, on every RPC protocol", () => {
  /** Bodies protobuf cannot parse, each as the issue found it answered with internal. */
  const unparseable: [string, Uint8Array][] = [
    ["premature EOF", new Uint8Array([0x0a, 0x05, 0x61])],
    ["illegal tag", new Uint8Array([0x07])],
    ["maximum recursion depth", nestedTooDeep()],
    ["invalid UTF-8", new Uint8Array([0x0a, 0x02, 0xed, 0xa0])],
  ];

  /** A CreateCustomerRequest whose unknown field 1000 nests groups of unknown fields past protobuf-es's limit. */
  function nestedTooDeep(): Uint8Array {
    const depth = 200;
    const start = [0xc3, 0x3e]; // field 1000, start group
    const end = [0xc4, 0x3e]; // field 1000, end group
    return new Uint8Array([...Array.from({ length: depth }, () => start).flat(), ...Array.from({ length: depth }, () => end).flat()]);
  }

  it.each(unparseable)("Connect binary, %s: 400 invalid_argument with the IR_06 detail", async (_, body) => {
    const res = await fetch(`${service.url}/paymentservice.v1.CustomerService/CreateCustomer`, {
      method: "POST",
      headers: { "content-type": "application/proto", "api-key": merchant.apiKey },
      body,
    });
    expect(res.status).toBe(400);
    const json = (await res.json()) as { code: string; details: { type: string; debug: { code: string } }[] };
    expect(json.code).toBe("invalid_argument");
    expect(json.details.find((d) => d.type === "paymentservice.v1.ErrorDetail")?.debug.code).toBe("IR_06");
  });

  it("a refusal connect gzips (a client accepting gzip, a long quoted key) is still IR_06, and does not quote the key", async () => {
    const card = "4242424242424242";
    const res = await fetch(`${service.url}/paymentservice.v1.CustomerService/CreateCustomer`, {
      method: "POST",
      headers: { "content-type": "application/json", "accept-encoding": "gzip", "api-key": merchant.apiKey },
      body: JSON.stringify({ [card + "k".repeat(3000)]: "x" }),
    });
    expect(res.status).toBe(400);
    const text = await res.text();
    expect(JSON.parse(text)).toMatchObject({ code: "invalid_argument", details: [{ debug: { code: "IR_06" } }] });
    expect(text).not.toContain(card);
  });

  it("a refusal connect would gzip into a gRPC-Web trailer frame (a long quoted key) is still IR_06 and quotes no card number", async () => {
    const card = "4242424242424242";
    const body = frame(Buffer.from(JSON.stringify({ [card + "k".repeat(3000)]: "x" })));
    const answer = await grpcWebRaw(service.url, "/paymentservice.v1.CustomerService/CreateCustomer", body, {
      "api-key": merchant.apiKey,
      "content-type": "application/grpc-web+json",
      "grpc-accept-encoding": "gzip",
    });
    expectGrpcInvalid(answer, "Unknown field");
    expect(answer.detail?.message).not.toContain(card);
  });

  it("a Connect GET whose message does not decode is 400 invalid_argument IR_06 naming the message parameter", async () => {
    const res = await fetch(`${service.url}${grpcProcedure}?connect=v1&encoding=proto&base64=1&message=!!!!`, {
      headers: { "api-key": merchant.apiKey },
    });
    expect(res.status).toBe(400);
    const json = (await res.json()) as { code: string; message: string };
    expect(json).toMatchObject({ code: "invalid_argument" });
    expect(json.message).toContain("message query parameter");
  });

  it.each(unparseable)("gRPC and gRPC-Web, %s: status 3 with the IR_06 detail", async (_, body) => {
    expectGrpcInvalid(
      await grpcRaw(service.url, "/paymentservice.v1.CustomerService/CreateCustomer", frame(body), { "api-key": merchant.apiKey }),
    );
    expectGrpcInvalid(
      await grpcWebRaw(service.url, "/paymentservice.v1.CustomerService/CreateCustomer", frame(body), { "api-key": merchant.apiKey }),
    );
  });

  it.each([
    ["a compressed flag without grpc-encoding", frame(new Uint8Array([1, 2, 3]), 1), {}, "compressed"],
    ["a compressed flag with gzip that is not gzip", frame(new Uint8Array([1, 2, 3]), 1), { "grpc-encoding": "gzip" }, "decompressed"],
    ["two messages in a unary call", Buffer.concat([frame(new Uint8Array()), frame(new Uint8Array())]), {}, "more than one message"],
    ["bytes after the message", Buffer.concat([frame(new Uint8Array()), Buffer.from([1, 2])]), {}, "message frame"],
    ["no message at all", new Uint8Array(), {}, "no message"],
    ["a length prefix beyond the size limit", frame(new Uint8Array(), 0, 0x7fffffff), {}, "larger than"],
    ["an unknown grpc-encoding", frame(new Uint8Array()), { "grpc-encoding": "zstd" }, "zstd"],
    ["a grpc-timeout that is no duration", frame(new Uint8Array()), { "grpc-timeout": "soon" }, "grpc-timeout"],
  ])("gRPC, %s: status 3 with the IR_06 detail naming the problem", async (_, body, header, mentions) => {
    expectGrpcInvalid(await grpcRaw(service.url, grpcProcedure, body, { "api-key": merchant.apiKey, ...header }), mentions);
  });

  it("gRPC-Web, two messages in a unary call: status 3 with the IR_06 detail", async () => {
    const body = Buffer.concat([frame(new Uint8Array()), frame(new Uint8Array())]);
    expectGrpcInvalid(await grpcWebRaw(service.url, grpcProcedure, body, { "api-key": merchant.apiKey }), "more than one message");
  });

  it("a Connect GET with an encoding Connect does not have is 415 with the Connect error JSON, IR_06", async () => {
    const res = await fetch(`${service.url}${grpcProcedure}?connect=v1&encoding=xml&message=%7B%7D`, {
      headers: { "api-key": merchant.apiKey },
    });
    expect(res.status).toBe(415);
    expect(await res.json()).toMatchObject({ code: "invalid_argument", message: expect.stringContaining("encoding") });
  });

  it("a binary timestamp no date holds (seconds beyond year 9999) is IR_05 naming the field, on every RPC protocol", async () => {
    const body = toBinary(ListPaymentsRequestSchema, create(ListPaymentsRequestSchema, { createdGte: { seconds: 10n ** 15n } }));
    const res = await fetch(`${service.url}/paymentservice.v1.PaymentService/ListPayments`, {
      method: "POST",
      headers: { "content-type": "application/proto", "api-key": merchant.apiKey },
      body,
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toContain("created_gte");
    const answer = await grpcRaw(service.url, "/paymentservice.v1.PaymentService/ListPayments", frame(body), {
      "api-key": merchant.apiKey,
    });
    expect({ grpc: answer.grpcStatus, code: answer.detail?.code }).toEqual({ grpc: Code.InvalidArgument, code: "IR_05" });
  });

  it("a gRPC-Web message declaring 2 GiB is refused unread, and its connection is closed or serves the next request", async () => {
    const declared = Buffer.concat([frame(new Uint8Array(), 0, 0x7fffffff), Buffer.alloc(200_000, 0x20)]);
    const refused = `POST /paymentservice.v1.CustomerService/CreateCustomer HTTP/1.1\r\nHost: localhost\r\ncontent-type: application/grpc-web+proto\r\napi-key: ${merchant.apiKey}\r\ncontent-length: ${declared.length}\r\n\r\n`;
    const next = `GET /health HTTP/1.1\r\nHost: localhost\r\napi-key: ${merchant.apiKey}\r\nconnection: close\r\n\r\n`;
    const res = await rawHttp1(service.url, Buffer.concat([Buffer.from(refused), declared, Buffer.from(next)]));
    expect(res.status).toBe(200);
    expect(res.text).toContain("grpc-status: 3");
    const closedAfterRefusal = /\r\nconnection: close\r\n/i.test(res.text.split("\r\n\r\n", 1)[0]!);
    if (!closedAfterRefusal) expect(res.text).toMatch(/HTTP\/1\.1 200 OK[\s\S]*"status":"ok"/);
    expect(res.closed).toBe(true);
    await expectAlive();
  });

  it("an RPC path with a content type no RPC protocol uses is 415 with the Connect error JSON, IR_06", async () => {
    const res = await fetch(`${service.url}${grpcProcedure}`, {
      method: "POST",
      headers: { "content-type": "text/plain", "api-key": merchant.apiKey },
      body: "{}",
    });
    expect(res.status).toBe(415);
    expect(await res.json()).toMatchObject({ code: "invalid_argument", message: expect.stringContaining("text/plain") });
  });

  it("an RPC path with a method it does not take is 405 with Allow and the IR_03 detail", async () => {
    const res = await fetch(`${service.url}/paymentservice.v1.PaymentService/CreatePayment`, { headers: { "api-key": merchant.apiKey } });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
    const json = (await res.json()) as { details: { debug: { code: string } }[] };
    expect(json.details[0]?.debug.code).toBe("IR_03");
  });
});

describe("4. what Node's HTTP parser refuses carries the documented body", () => {
  // One instance whatever the topology: Node's parser at this instance's port is what is tested; a
  // load balancer in front answers what it refuses with its own page, and never forwards it.
  const service = runningInstance();
  // A merchant of its own: on the embedded database each instance has a database of its own.
  let merchant: TestMerchant;
  beforeAll(async () => {
    merchant = await newMerchant(service.url);
  });

  it("a malformed method is 400 with the REST error object, and the connection is closed", async () => {
    const res = await rawHttp1(service.url, "G@T /health HTTP/1.1\r\nHost: localhost\r\n\r\n");
    expect(res.status).toBe(400);
    expect(res.json).toEqual({
      error: {
        type: "invalid_request",
        code: "IR_06",
        message: expect.stringContaining("not valid HTTP"),
        request_id: res.headers["x-request-id"],
      },
    });
    expect(res.headers["x-request-id"]).toMatch(/^req_/);
    expect(res.closed).toBe(true);
  });

  it("a request line the parser refuses, followed by more bytes, still gets its answer rather than a reset", async () => {
    const answer = await rawHttp1(service.url, (socket) => {
      socket.write(
        "POST \\payments\\pay_1\\capture HTTP/1.1\r\nHost: localhost\r\ncontent-type: application/json\r\ncontent-length: 12\r\n\r\n",
      );
      setTimeout(() => socket.write('{"amount":1}'), 50);
    });
    expect(answer.text).toMatch(/^HTTP\/1\.1 400/);
    expect(answer.text).toContain('"code":"IR_06"');
  });

  it("an over-long header is 431 with the REST error object", async () => {
    const res = await rawHttp1(service.url, `GET /health HTTP/1.1\r\nHost: localhost\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`);
    expect(res.status).toBe(431);
    expect(res.json).toMatchObject({ error: { type: "invalid_request", code: "IR_06" } });
  });

  it("an over-long request head the client is still sending for seconds gets its 431, not a reset that loses it", async () => {
    const answer = await rawHttp1(
      service.url,
      (socket) => {
        // Not read until the whole head is sent, as a client busy writing does not read: a reset
        // meanwhile would drop the answer waiting unread.
        socket.pause();
        socket.write(`GET /events/list?created_gte=${"a".repeat(20_000)}`);
        let chunks = 0;
        const more = setInterval(() => {
          if (++chunks < 8) return void socket.write("a".repeat(20_000));
          clearInterval(more);
          socket.write(" HTTP/1.1\r\nHost: localhost\r\n\r\n", () => socket.resume());
        }, 300);
      },
      // Past the server's linger of ten seconds at most, so the answer is read off a closed connection.
      15_000,
    );
    expect(answer.error).toBeUndefined();
    expect(answer.text).toMatch(/^HTTP\/1\.1 431/);
    expect(answer.text).toContain('"code":"IR_06"');
  });

  it("Content-Length together with Transfer-Encoding (request smuggling) is 400 with the REST error object", async () => {
    const res = await rawHttp1(
      service.url,
      "POST /customers HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    );
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ error: { code: "IR_06" } });
  });

  it("CONNECT is 405 with the REST error object, not a silently closed connection", async () => {
    const res = await rawHttp1(service.url, "CONNECT localhost:443 HTTP/1.1\r\nHost: localhost:443\r\n\r\n");
    expect(res.status).toBe(405);
    expect(res.json).toMatchObject({ error: { code: "IR_06" } });
  });

  it("a refusal before an ordinary body arrives keeps the connection: the body is read and dropped, the next request served", async () => {
    const { hostname, port } = new URL(service.url);
    const { connect } = await import("node:net");
    const body = JSON.stringify({ name: "Jane" });
    const text = await new Promise<string>((resolve) => {
      const socket = connect(Number(port), hostname);
      let received = "";
      let sentRest = false;
      socket.on("data", (chunk: Buffer) => {
        received += chunk.toString("latin1");
        // The refusal came before the body was sent: send it, then a second request on the same connection.
        if (received.includes("IR_01") && !sentRest) {
          sentRest = true;
          // Not half-closed: Node drops the requests of a client that ends its side.
          socket.write(`${body}GET /health HTTP/1.1\r\nHost: localhost\r\napi-key: ${merchant.apiKey}\r\nconnection: close\r\n\r\n`);
        }
      });
      socket.on("close", () => resolve(received));
      socket.write(
        `POST /customers HTTP/1.1\r\nHost: localhost\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`,
      );
    });
    expect(text).toMatch(/^HTTP\/1\.1 401/);
    expect(text.split("\r\n\r\n", 1)[0]).not.toMatch(/connection: close/i);
    expect(text).toMatch(/HTTP\/1\.1 200 OK[\s\S]*"status":"ok"/);
  });

  it.each([
    ["declared by Content-Length", `Content-Length: ${100 * 1024 * 1024}\r\n`],
    ["sent chunked", "Transfer-Encoding: chunked\r\n"],
  ])("a 100 MB upload %s is refused early with 413 and the connection closed, not read to its end", async (_, length) => {
    const { hostname, port } = new URL(service.url);
    const { connect } = await import("node:net");
    const answer = await new Promise<{ text: string; sentBytes: number }>((resolve) => {
      const socket = connect(Number(port), hostname);
      let text = "";
      let sentBytes = 0;
      let done = false;
      socket.on("data", (chunk: Buffer) => (text += chunk.toString("latin1")));
      socket.on("error", () => undefined);
      socket.on("close", () => {
        done = true;
        resolve({ text, sentBytes });
      });
      socket.write(
        `POST /customers HTTP/1.1\r\nHost: localhost\r\napi-key: ${merchant.apiKey}\r\ncontent-type: application/json\r\n${length}\r\n`,
      );
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      const chunked = length.startsWith("Transfer");
      const pump = (): void => {
        while (!done && sentBytes < 100 * 1024 * 1024) {
          const piece = chunked ? Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from("\r\n")]) : chunk;
          sentBytes += chunk.length;
          if (!socket.write(piece)) {
            socket.once("drain", pump);
            return;
          }
        }
      };
      pump();
    });
    expect(answer.text).toMatch(/^HTTP\/1\.1 413/);
    expect(answer.text).toContain('"code":"IR_06"');
    expect(answer.sentBytes).toBeLessThan(100 * 1024 * 1024);
    await expectAlive();
  });
});

describe("5. every JSON codec refuses what it does not understand", () => {
  /** Connect, gRPC+json and gRPC-Web+json clients that send proto JSON. */
  function jsonTransport(protocol: RpcProtocol) {
    const withKey: Interceptor = (next) => (req) => {
      req.header.set("api-key", merchant.apiKey);
      return next(req);
    };
    const options = { baseUrl: service.url, useBinaryFormat: false, interceptors: [withKey] };
    if (protocol === "grpc") return createGrpcTransport(options);
    return protocol === "connect"
      ? createConnectTransport({ ...options, httpVersion: "1.1" })
      : createGrpcWebTransport({ ...options, httpVersion: "1.1" });
  }

  /** Sends `json` as it is over Connect JSON, the way curl or a browser would. */
  async function connectJson(procedure: string, json: unknown): Promise<{ status: number; body: { code: string; message: string } }> {
    const res = await fetch(`${service.url}/paymentservice.v1.${procedure}`, {
      method: "POST",
      headers: { "content-type": "application/json", "api-key": merchant.apiKey },
      body: JSON.stringify(json),
    });
    return { status: res.status, body: (await res.json()) as { code: string; message: string } };
  }

  it("CreatePayment with the REST word captureMethod: manual is refused naming the field, and no money moves", async () => {
    const before = await paymentsOfMerchant();
    const res = await connectJson("PaymentService/CreatePayment", {
      amount: "100",
      currency: "USD",
      profileId: merchant.profileId,
      captureMethod: "manual",
      confirm: true,
      paymentMethodData: { card: { cardNumber: "4242424242424242", cardExpMonth: "12", cardExpYear: "2030", cardCvc: "123" } },
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe("invalid_argument");
    expect(res.body.message).toContain("capture_method");
    expect(res.body.message).toContain("CAPTURE_METHOD_MANUAL");
    expect(await paymentsOfMerchant()).toBe(before);
  });

  it("ListPayments with status: succeeded is refused naming the field, instead of listing every status", async () => {
    const res = await connectJson("PaymentService/ListPayments", { status: "succeeded" });
    expect(res.status).toBe(400);
    expect(res.body.message).toContain("status");
  });

  it("a misspelt field is refused naming it, with its path", async () => {
    const res = await connectJson("CustomerService/CreateCustomer", { nmae: "Jane", address: { citty: "Paris" } });
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/Unknown field: (nmae|address\.citty)/);
  });

  it.each(["connect", "grpc", "grpc-web"] as const)(
    "over %s, with JSON or binary, an enum number the enum lacks is invalid_argument IR_05 naming the field",
    async (protocol) => {
      // A typed client cannot send an unknown field; an enum number outside the enum it can (proto enums are open).
      for (const payments of [
        createClient(PaymentService, jsonTransport(protocol)),
        rpcClient(PaymentService, service.url, protocol, { apiKey: merchant.apiKey }),
      ]) {
        const error = await expectRpcError(payments.listPayments({ status: 99 as PaymentStatus }), Code.InvalidArgument, "IR_05");
        expect(error).toContain("status");
      }
    },
  );

  it("gRPC+json and gRPC-Web+json bodies with an unknown field are refused naming it", async () => {
    const body = frame(Buffer.from('{"amount":"100","currency":"USD","captureMehtod":"CAPTURE_METHOD_MANUAL"}'));
    const header = { "api-key": merchant.apiKey, "content-type": "application/grpc+json" };
    const viaGrpc = await grpcRaw(service.url, "/paymentservice.v1.PaymentService/CreatePayment", body, header);
    expectGrpcInvalid(viaGrpc, "captureMehtod");
    const viaWeb = await grpcWebRaw(service.url, "/paymentservice.v1.PaymentService/CreatePayment", body, {
      ...header,
      "content-type": "application/grpc-web+json",
    });
    expectGrpcInvalid(viaWeb, "captureMehtod");
  });
});

describe("6. order and precision of refusals", () => {
  it.each([
    ["capture", "POST", "/payments/pay_x/capture", "not json"],
    ["cancel", "POST", "/payments/pay_x/cancel", '{"cancellation_reason": 5, "nonsense": true}'],
    ["update", "POST", "/payments/pay_x", '{"amount": "many"}'],
    ["a list", "POST", "/payments/list", '{"limit": "ten"}'],
  ])("a publishable key on %s is 403 IR_22 whatever the body holds", async (_, method, path, rawBody) => {
    expectExactRestError(await call(method, path, { apiKey: publishableKey, rawBody }), 403, "IR_22");
  });

  it("a publishable key listing with a malformed query is 403 IR_22", async () => {
    expectExactRestError(await call("GET", "/payments/list?limit=ten&colour=blue", { apiKey: publishableKey }), 403, "IR_22");
  });

  it.each(["connect", "grpc", "grpc-web"] as const)(
    "over %s, a publishable key on capture is IR_22 even with a body that does not parse",
    async (protocol) => {
      const body = new Uint8Array([0x0a, 0x05, 0x61]);
      if (protocol === "connect") {
        const res = await fetch(`${service.url}/paymentservice.v1.PaymentService/CapturePayment`, {
          method: "POST",
          headers: { "content-type": "application/proto", "api-key": publishableKey },
          body,
        });
        expect(res.status).toBe(403);
        expect(((await res.json()) as { code: string }).code).toBe("permission_denied");
        return;
      }
      const send = protocol === "grpc" ? grpcRaw : grpcWebRaw;
      const answer = await send(service.url, "/paymentservice.v1.PaymentService/CapturePayment", frame(body), {
        "api-key": publishableKey,
      });
      expect({ grpc: answer.grpcStatus, code: answer.detail?.code }).toEqual({ grpc: Code.PermissionDenied, code: "IR_22" });
    },
  );

  it.each(["connect", "grpc", "grpc-web"] as RpcProtocol[])(
    "over %s, an empty id is invalid_argument IR_04 naming the field, not not_found",
    async (protocol) => {
      const payments = rpcClient(PaymentService, service.url, protocol, { apiKey: merchant.apiKey });
      expect(await expectRpcError(payments.retrievePayment({ paymentId: "" }), Code.InvalidArgument, "IR_04")).toContain("payment_id");
      expect(await expectRpcError(payments.capturePayment({ paymentId: "" }), Code.InvalidArgument, "IR_04")).toContain("payment_id");
      const customers = rpcClient(CustomerService, service.url, protocol, { apiKey: merchant.apiKey });
      expect(await expectRpcError(customers.deleteCustomer({ customerId: "" }), Code.InvalidArgument, "IR_04")).toContain("customer_id");
    },
  );

  it.each([
    ["a string", { limit: "ten" }],
    ["a fraction", { limit: 2.5 }],
    ["too large for any integer field", { limit: 1e20 }],
    ["out of range", { limit: 0 }],
  ])("a list limit that is %s is IR_06 (decisions §7), in a body and in a query", async (_, body) => {
    expectExactRestError(await call("POST", "/customers/list", { body }), 400, "IR_06", "limit");
    expectExactRestError(await call("GET", `/customers/list?limit=${encodeURIComponent(String(body.limit))}`), 400, "IR_06", "limit");
  });

  it("no message quotes the wire type's range or a card number sent where it does not belong", async () => {
    const card = "4242424242424242";
    const messages = [
      expectRestError(await call("POST", "/customers/list", { body: { offset: 1e12 } }), 400, "IR_05"),
      expectRestError(
        await call("POST", "/payments", { body: { amount: Number(card), currency: "USD", profile_id: merchant.profileId } }),
        400,
        "IR_05",
      ),
      expectRestError(await call("GET", `/nowhere/${card}`), 404, "IR_02"),
      expectRestError(await call("POST", "/customers", { body: { email: card } }), 400, "IR_05"),
    ];
    for (const message of messages) {
      expect(message).not.toMatch(/2147483647|9007199254740991/);
      expect(message).not.toContain(card);
    }
  });

  it("connect-timeout-ms: 0 is deadline_exceeded TO_01, and the call does not run", async () => {
    const before = await paymentsOfMerchant();
    const res = await fetch(`${service.url}/paymentservice.v1.PaymentService/CreatePayment`, {
      method: "POST",
      headers: { "content-type": "application/proto", "api-key": merchant.apiKey, "connect-timeout-ms": "0" },
      body: toBinary(
        CreatePaymentRequestSchema,
        create(CreatePaymentRequestSchema, { amount: 100n, currency: "USD", profileId: merchant.profileId }),
      ),
    });
    expect(res.status).toBe(504);
    const json = (await res.json()) as { code: string; details: { debug: { code: string } }[] };
    expect(json.code).toBe("deadline_exceeded");
    expect(json.details[0]?.debug.code).toBe("TO_01");
    expect(await paymentsOfMerchant()).toBe(before);
  });

  it("grpc-timeout that has passed when the call starts is DEADLINE_EXCEEDED (4) with the TO_01 detail", async () => {
    const answer = await grpcRaw(service.url, grpcProcedure, frame(new Uint8Array()), { "api-key": merchant.apiKey, "grpc-timeout": "0n" });
    expect({ grpc: answer.grpcStatus, code: answer.detail?.code }).toEqual({ grpc: Code.DeadlineExceeded, code: "TO_01" });
  });
});

describe.skipIf(!onPostgres)("a deadline that passes while the call runs (PostgreSQL: needs a second session)", () => {
  /** Sends a capture with a 300 ms deadline as a client would, but without the client's own timer, so the server's answer is what arrives. */
  const captureWithDeadline: Record<
    "connect" | "grpc",
    (paymentId: string) => Promise<{ code: number | undefined; detail: string | undefined }>
  > = {
    async connect(paymentId) {
      const res = await fetch(`${service.url}/paymentservice.v1.PaymentService/CapturePayment`, {
        method: "POST",
        headers: { "content-type": "application/json", "api-key": merchant.apiKey, "connect-timeout-ms": "300" },
        body: JSON.stringify({ paymentId }),
      });
      const json = (await res.json()) as { code: string; details?: { debug: { code: string } }[] };
      return { code: json.code === "deadline_exceeded" ? Code.DeadlineExceeded : undefined, detail: json.details?.[0]?.debug.code };
    },
    async grpc(paymentId) {
      const body = frame(toBinary(CapturePaymentRequestSchema, create(CapturePaymentRequestSchema, { paymentId })));
      const answer = await grpcRaw(service.url, "/paymentservice.v1.PaymentService/CapturePayment", body, {
        "api-key": merchant.apiKey,
        "grpc-timeout": "300m",
      });
      return { code: answer.grpcStatus, detail: answer.detail?.code };
    },
  };

  it.each(["connect", "grpc"] as const)(
    "over %s it is answered TO_01 at the deadline, and the capture still completes",
    async (protocol) => {
      const payments = rpcClient(PaymentService, service.url, protocol, { apiKey: merchant.apiKey });
      const payment = await payments.createPayment({
        amount: 1500n,
        currency: "USD",
        profileId: merchant.profileId,
        captureMethod: CaptureMethod.MANUAL,
        confirm: true,
        paymentMethodData: { card: { cardNumber: "4242424242424242", cardExpMonth: "12", cardExpYear: "2030", cardCvc: "123" } },
      });
      expect(payment.status).toBe(PaymentStatus.REQUIRES_CAPTURE);
      // Another session holds the payment's row, so the capture waits past its deadline.
      await onFileDatabase(async (db) => {
        await db.query("BEGIN");
        await db.query("SELECT 1 FROM payments WHERE payment_id = $1 FOR UPDATE", [payment.paymentId]);
        const started = Date.now();
        expect(await captureWithDeadline[protocol](payment.paymentId)).toEqual({ code: Code.DeadlineExceeded, detail: "TO_01" });
        expect(Date.now() - started).toBeLessThan(2_000);
        await db.query("COMMIT");
      });
      await expect
        .poll(async () => (await payments.retrievePayment({ paymentId: payment.paymentId })).status, { timeout: 5_000 })
        .toBe(PaymentStatus.SUCCEEDED);
    },
  );
});

describe("a failure of ours", () => {
  it("every answer carries X-Request-Id, on every protocol", async () => {
    expect((await call("GET", "/health")).headers.get("x-request-id")).toMatch(/^req_/);
    expect((await call("GET", "/nowhere")).headers.get("x-request-id")).toMatch(/^req_/);
    const answer = await grpcRaw(service.url, grpcProcedure, frame(new Uint8Array()), { "api-key": merchant.apiKey });
    expect(answer.headers.get("x-request-id")).toMatch(/^req_/);
  });

  it("is 500 HE_00 carrying the request id on every protocol, and never stops the process", async () => {
    // One instance whatever the topology: its own database is taken away; behind a load balancer the
    // healthy instances would answer instead, which is the balancer's purpose, not this test's.
    const broken = await startInstance();
    const { apiKey } = await newMerchant(broken.url);
    // The database goes away under the running service: every call now fails on our side.
    await broken.app.dataSource.destroy();
    try {
      const res = await rest(broken.url, "POST", "/customers", { apiKey, body: { name: "Jane" } });
      expect(res.status).toBe(500);
      expect(res.body).toEqual({
        error: {
          type: "api_error",
          code: "HE_00",
          message: expect.stringContaining(res.headers.get("x-request-id")!),
          request_id: res.headers.get("x-request-id"),
        },
      });
      for (const protocol of ["connect", "grpc", "grpc-web"] as const) {
        const customers = rpcClient(CustomerService, broken.url, protocol, { apiKey });
        expect(await expectRpcError(customers.listCustomers({}), Code.Internal, "HE_00")).toMatch(/\(request req_\w+\)/);
      }
      const health = rpcClient(HealthService, broken.url, "grpc", { apiKey });
      await expectRpcError(health.check({}), Code.Internal, "HE_00");
    } finally {
      await broken.close().catch(() => undefined);
    }
    await expectAlive();
  });
});
