import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LogLine, logLines } from "../support/server-log.js";
import { CustomerService } from "../../gen/paymentservice/v1/customer_pb.js";
import { rest, rpcClient } from "../support/clients.js";
import { serverProcessDatabase } from "../support/database.js";
import { newMerchant, type TestMerchant } from "../support/merchant.js";
import { spawnServer, type ServerProcess } from "../support/server-process.js";

/*
 * Issue 19 item 7: with OTEL_EXPORTER_OTLP_ENDPOINT set, every call (REST, Connect, gRPC, gRPC-Web)
 * is a server span named for its procedure, the PostgreSQL statements it ran are spans beneath it, a
 * caller's W3C traceparent is continued, and the call's log line names the trace; unset, the SDK is
 * not even loaded.
 */

/** A span as OTLP/HTTP JSON carries it, with its attributes flattened to plain values. */
interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  readonly name: string;
  readonly kind: number;
  readonly attributes: Record<string, unknown>;
  /** Absent or code 0 (unset) unless the span failed (2). */
  readonly status?: { code?: number };
}

/** OTLP's SPAN_KIND_SERVER. */
const serverKind = 2;

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
}

/** A small OTLP/HTTP receiver (the http/json protocol), as a collector would be. */
async function startReceiver(): Promise<{ url: string; spans: ReceivedSpan[]; server: Server }> {
  const spans: ReceivedSpan[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => {
      body += chunk;
    });
    req.on("end", () => {
      if (req.url === "/v1/traces") {
        for (const resourceSpans of JSON.parse(body).resourceSpans ?? []) {
          for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
            for (const span of scopeSpans.spans ?? []) {
              const attributes = Object.fromEntries(
                (span.attributes ?? []).map(({ key, value }: { key: string; value: OtlpValue }) => [
                  key,
                  value.stringValue ?? (value.intValue === undefined ? value.boolValue : Number(value.intValue)),
                ]),
              );
              spans.push({ ...span, parentSpanId: span.parentSpanId || undefined, attributes });
            }
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, server };
}

/** Preloaded into a server to report how many OpenTelemetry modules it loaded. */
const probe = `--import=${fileURLToPath(new URL("../support/loaded-modules.mjs", import.meta.url))}`;

/** How many OpenTelemetry modules a stopped server reported having loaded. */
function openTelemetryModulesLoaded(output: string): number {
  const found = /opentelemetry modules loaded: (\d+)/.exec(output);
  if (found === null) throw new Error(`the server did not report its modules:\n${output}`);
  return Number(found[1]);
}

describe("traces, with OTEL_EXPORTER_OTLP_ENDPOINT set", () => {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let server: ServerProcess;
  let merchant: TestMerchant;
  const callerTraceId = randomBytes(16).toString("hex");
  const callerSpanId = randomBytes(8).toString("hex");
  let restRequestId: string;
  let connectRequestId: string;
  let refusedRequestId: string;
  let lines: LogLine[];

  beforeAll(async () => {
    receiver = await startReceiver();
    server = await spawnServer({
      ...(await serverProcessDatabase()),
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      NODE_OPTIONS: probe,
    });
    merchant = await newMerchant(server.url);

    const created = await rest(server.url, "POST", "/customers", { apiKey: merchant.apiKey, body: { name: "Jane" } });
    expect(created.status).toBe(200);
    restRequestId = created.headers.get("x-request-id")!;

    const connect = await fetch(`${server.url}/paymentservice.v1.CustomerService/CreateCustomer`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "api-key": merchant.apiKey,
        traceparent: `00-${callerTraceId}-${callerSpanId}-01`,
      },
      body: JSON.stringify({ name: "John" }),
    });
    expect(connect.status).toBe(200);
    connectRequestId = connect.headers.get("x-request-id")!;

    for (const protocol of ["grpc", "grpc-web"] as const) {
      await rpcClient(CustomerService, server.url, protocol, { apiKey: merchant.apiKey }).createCustomer({ name: protocol });
    }

    const refused = await rest(server.url, "POST", "/customers", { apiKey: merchant.apiKey, rawBody: "{not json" });
    expect(refused.body.error.code).toBe("IR_06");
    refusedRequestId = refused.headers.get("x-request-id")!;

    // A stop sends the spans still buffered before the process exits.
    await server.stop();
    lines = logLines(server.output());
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    receiver?.server.close();
  });

  /** The server span of the call its log line names, with the line. */
  function callOf(requestId: string): { line: LogLine; span: ReceivedSpan } {
    const line = lines.find((l) => l.message === "request" && l.request_id === requestId);
    expect(line).toBeDefined();
    const span = receiver.spans.find((s) => s.kind === serverKind && s.attributes["payment_service.request_id"] === requestId);
    expect(span).toBeDefined();
    return { line: line!, span: span! };
  }

  /** Whether `ancestor` is `span`'s parent, or its parent's, and so on. */
  function descendsFrom(span: ReceivedSpan, ancestor: ReceivedSpan): boolean {
    let parent = span.parentSpanId;
    while (parent !== undefined) {
      if (parent === ancestor.spanId) return true;
      parent = receiver.spans.find((s) => s.spanId === parent)?.parentSpanId;
    }
    return false;
  }

  it.each([
    ["REST", () => restRequestId, "rest"],
    ["Connect", () => connectRequestId, "connect"],
  ])("makes one server span of a %s call, named for its procedure, with the outcome", (_, requestId, protocol) => {
    const { span } = callOf(requestId());
    expect(receiver.spans.filter((s) => s.attributes["payment_service.request_id"] === requestId())).toHaveLength(1);
    expect(span.name).toBe("paymentservice.v1.CustomerService/CreateCustomer");
    expect(span.attributes).toMatchObject({
      "rpc.system": "connect_rpc",
      "rpc.service": "paymentservice.v1.CustomerService",
      "rpc.method": "CreateCustomer",
      "http.request.method": "POST",
      "http.response.status_code": 200,
      "payment_service.protocol": protocol,
    });
    expect(span.attributes["error.type"]).toBeUndefined();
  });

  it.each(["grpc", "grpc-web"])("names a %s call's span for its procedure too, its rpc.system grpc", (protocol) => {
    const spans = receiver.spans.filter((s) => s.kind === serverKind && s.attributes["payment_service.protocol"] === protocol);
    expect(spans).toHaveLength(1);
    expect(spans[0]!.name).toBe("paymentservice.v1.CustomerService/CreateCustomer");
    expect(spans[0]!.attributes).toMatchObject({ "rpc.system": "grpc", "rpc.method": "CreateCustomer" });
  });

  it.each([
    ["REST", () => restRequestId],
    ["Connect", () => connectRequestId],
  ])("puts the PostgreSQL statements of a %s call beneath its span, in its trace", (_, requestId) => {
    const { span } = callOf(requestId());
    const statements = receiver.spans.filter((s) => s.attributes["db.system.name"] === "postgresql" && s.traceId === span.traceId);
    expect(statements.length).toBeGreaterThan(0);
    for (const statement of statements) expect(descendsFrom(statement, span)).toBe(true);
    expect(statements.some((s) => String(s.attributes["db.query.text"]).includes("INSERT"))).toBe(true);
  });

  it("continues the trace of a caller that sent a traceparent, and starts one for a caller that did not", () => {
    const connect = callOf(connectRequestId).span;
    expect(connect.traceId).toBe(callerTraceId);
    expect(connect.parentSpanId).toBe(callerSpanId);
    const restCall = callOf(restRequestId).span;
    expect(restCall.traceId).not.toBe(callerTraceId);
    expect(restCall.parentSpanId).toBeUndefined();
  });

  it("names the call's trace and span in its log line", () => {
    for (const requestId of [restRequestId, connectRequestId]) {
      const { line, span } = callOf(requestId);
      expect(line.trace_id).toBe(span.traceId);
      expect(line.span_id).toBe(span.spanId);
    }
  });

  it("gives a refused call's span its error code, without marking it failed: the client erred, not the service", () => {
    const { span } = callOf(refusedRequestId);
    expect(span.name).toBe("paymentservice.v1.CustomerService/CreateCustomer");
    expect(span.attributes).toMatchObject({ "http.response.status_code": 400, "error.type": "IR_06" });
    expect(span.status?.code ?? 0).toBe(0);
  });

  it("had the SDK loaded (the probe of the test below sees it)", () => {
    expect(openTelemetryModulesLoaded(server.output())).toBeGreaterThan(0);
  });
});

describe("traces, with OTEL_EXPORTER_OTLP_ENDPOINT unset", () => {
  it("loads no OpenTelemetry module and names no trace in the log", async () => {
    const server = await spawnServer({ ...(await serverProcessDatabase()), NODE_OPTIONS: probe });
    try {
      const merchant = await newMerchant(server.url);
      const created = await rest(server.url, "POST", "/customers", { apiKey: merchant.apiKey, body: { name: "Jane" } });
      expect(created.status).toBe(200);
      await server.stop();
      const line = logLines(server.output()).find((l) => l.request_id === created.headers.get("x-request-id"));
      expect(line).toMatchObject({ message: "request", status: 200 });
      expect(line).not.toHaveProperty("trace_id");
      expect(openTelemetryModulesLoaded(server.output())).toBe(0);
    } finally {
      await server.stop();
    }
  }, 120_000);
});
