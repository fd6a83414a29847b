import { readdirSync } from "node:fs";
import { create, equals, type DescMethod, type DescService, type Message } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeApp } from "../../src/app.js";
import routes from "../../src/routes.js";
import { ApiRouter } from "../../src/transport/api-router.js";
import { type ErrorCode, serviceUnavailable } from "../../src/errors.js";
import { writeMessage } from "../../src/rest-json/codec.js";
import { httpRulesOf } from "../../src/transport/rest/router.js";
import { PaymentService } from "../../gen/paymentservice/v1/payment_pb.js";
import { documentedErrors } from "../support/errors.js";
import { openTestApp } from "../support/service.js";
import { callRest, callRpc, type Outcome, restWays, rpcWays } from "./protocols.js";
import { sampleMessage, type SampleScope } from "./samples.js";
import {
  emptyHeader,
  failHeader,
  largeAnswer,
  largeHeader,
  limitHeader,
  rowHeader,
  startStubServer,
  stubErrorMessage,
  type StubServer,
} from "./stub-server.js";

/*
 * Protocol parity, generated from the descriptors (issue 39): every RPC of every service in
 * proto/paymentservice/v1, over each of its REST bindings and every RPC way (Connect JSON, binary,
 * HTTP/2, gzip, GET, a deadline; gRPC plain, gzip, a deadline; gRPC-Web binary and JSON), answering
 * with every field set and with none, and failing, against stub services behind the real transport
 * (stub-server.ts). Each row checks that the stub received the very message sent and the row's
 * headers, and that the client got the very answer (field by field: every field set, or none, which
 * REST writes as null or the default) with the stub's and admission's headers, or the stub's
 * documented error with its code, type, message, request id, HTTP status or Connect code. A new RPC
 * gets its rows without anyone writing them; business rules are tested once elsewhere.
 */

/** Every service the protos of the API declare, from the generated code. */
async function apiServices(): Promise<DescService[]> {
  const dir = new URL("../../gen/paymentservice/v1/", import.meta.url);
  const services: DescService[] = [];
  for (const file of readdirSync(dir)
    .filter((name) => name.endsWith("_pb.ts"))
    .sort()) {
    const exports = (await import(new URL(file, dir).href)) as Record<string, unknown>;
    for (const value of Object.values(exports)) {
      if (typeof value === "object" && value !== null && (value as DescService).kind === "service") services.push(value as DescService);
    }
  }
  return services;
}

const services = await apiServices();
const codes = Object.keys(documentedErrors) as ErrorCode[];
let server: StubServer;
beforeAll(async () => {
  server = await startStubServer(services);
});
afterAll(() => server.close());

/** A row's call: its way's name, the scope of its sample request, and the call itself. */
interface Way {
  readonly name: string;
  readonly scope: SampleScope;
  call(method: DescMethod, request: Message, header: Record<string, string>): Promise<Outcome>;
}

function waysOf(method: DescMethod): Way[] {
  const rest = restWays(httpRulesOf(method)).map(
    (way): Way => ({
      name: way.name,
      scope: way.hasBody ? "all" : "query",
      call: (m, request, header) => callRest(server.url, way, m, request, header),
    }),
  );
  const rpc = rpcWays.map(
    (way): Way => ({ name: way.name, scope: "all", call: (m, request, header) => callRpc(way, server.url, m, request, header) }),
  );
  return [...rest, ...rpc];
}

let rows = 0;
/** A header value naming one row, unique in the run. */
const nextRow = (): string => `row-${++rows}`;

const methods = services.flatMap((service) => service.methods);

it("has rows for every RPC the service serves, and every RPC it has rows for is served", async () => {
  const app = await openTestApp();
  try {
    const served = routes(new ApiRouter({}), app).handlers.map((handler) => handler.requestPath);
    expect(methods.map((method) => `/${method.parent.typeName}/${method.name}`).sort()).toEqual(served.sort());
  } finally {
    await closeApp(app);
  }
});

describe.each(methods.map((method, i) => ({ method, i })))("$method.parent.name/$method.name", ({ method, i }) => {
  // Each RPC fails with the next documented code: there are more RPCs than codes, so every code crosses every protocol.
  const code = codes[i % codes.length]!;
  const ways = waysOf(method);

  const answers = ways.flatMap((way) => [
    { ...way, answer: "its sample" },
    { ...way, answer: "an empty message" },
  ]);

  it.each(answers)("answers over $name as the stub answered, with $answer", async (way) => {
    const row = nextRow();
    const request = sampleMessage(method.input, way.scope);
    const empty = way.answer === "an empty message";
    const header = { [rowHeader]: row, "x-parity-note": "carried", ...(empty ? { [emptyHeader]: "yes" } : {}) };
    const outcome = await way.call(method, request, header);
    if (!outcome.ok) expect.fail(`${way.name}: ${JSON.stringify(outcome.error)}`);
    const received = server.received(row);
    expect(received, "the stub was not called").toBeDefined();
    expect(equals(method.input, received!.request, request), "the stub received another request").toBe(true);
    expect(received!.header.get("x-parity-note")).toBe("carried");
    expect(outcome.header.get(rowHeader)).toBe(row);
    expect(outcome.header.get(limitHeader)).toBe("1000");
    const answer = empty ? create(method.output) : sampleMessage(method.output);
    if (outcome.json !== undefined) expect(outcome.json).toEqual(writeMessage(answer, method.output));
    else {
      const expected = method.methodKind === "server_streaming" ? 2 : 1;
      expect(outcome.messages).toHaveLength(expected);
      for (const message of outcome.messages) expect(equals(method.output, message, answer), "another answer arrived").toBe(true);
    }
  });

  it.each(ways)(`fails over $name with the stub's ${code}`, async (way) => {
    const row = nextRow();
    const outcome = await way.call(method, sampleMessage(method.input, way.scope), { [rowHeader]: row, [failHeader]: code });
    if (outcome.ok) expect.fail(`${way.name} answered instead of failing`);
    expect(server.received(row), "the stub was not called").toBeDefined();
    const rest = way.name.startsWith("REST");
    expect(outcome.error).toEqual({
      code,
      type: documentedErrors[code].type,
      // SU_01 always says what to do, whatever was thrown (transport/errors.ts).
      message: code === "SU_01" ? serviceUnavailable().message : stubErrorMessage(method),
      namesItsRequest: true,
      status: rest ? documentedErrors[code].http : documentedErrors[code].rpc,
    });
    if (method.methodKind === "server_streaming") {
      // The stream's first message went out before the failure, headers with it.
      expect(outcome.messages).toHaveLength(1);
      expect(outcome.header.get(rowHeader)).toBe(row);
    } else {
      expect(outcome.header.get(rowHeader)).toBe(row);
      expect(outcome.header.get(limitHeader)).toBe("1000");
    }
    if (code === "SU_01") expect(outcome.header.get("retry-after"), "SU_01 without Retry-After").not.toBeNull();
  });
});

describe("answers over a kilobyte", () => {
  const method: DescMethod = PaymentService.method.createPayment;

  it.each(waysOf(method))("arrive whole over $name, compressed where the protocol compresses for a client that accepts it", async (way) => {
    const outcome = await way.call(method, sampleMessage(method.input, way.scope), { [rowHeader]: nextRow(), [largeHeader]: "yes" });
    if (!outcome.ok) expect.fail(`${way.name}: ${JSON.stringify(outcome.error)}`);
    const answer = largeAnswer(method);
    if (outcome.json !== undefined) expect(outcome.json).toEqual(writeMessage(answer, method.output));
    else expect(equals(method.output, outcome.messages[0]!, answer), "another answer arrived").toBe(true);
    // connect-node's clients accept gzip: Connect unary answers say so in content-encoding, gRPC's in grpc-encoding.
    if (way.name.startsWith("Connect")) expect(outcome.header.get("content-encoding")).toBe("gzip");
    if (way.name.startsWith("gRPC") && !way.name.startsWith("gRPC-Web")) expect(outcome.header.get("grpc-encoding")).toBe("gzip");
  });
});
