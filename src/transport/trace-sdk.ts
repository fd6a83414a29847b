import type { IncomingHttpHeaders } from "node:http";
import { context, isSpanContextValid, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { PgInstrumentation } from "@opentelemetry/instrumentation-pg";
import { NodeSDK } from "@opentelemetry/sdk-node";
import type { RequestRecord } from "./request-record.js";
import type { WireProtocol } from "../transport/protocol.js";
import type { CallSpan, Tracing } from "./tracing.js";

/** The service's name in traces unless OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) says otherwise. */
const defaultServiceName = "payment-service";

/** `/package.Service/Method`: a procedure the record names, as opposed to a page's path prefix. */
const procedurePattern = /^\/([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\/([A-Za-z_]\w*)$/;

/** rpc.system of each wire protocol: REST calls are transcoded onto the very Connect handlers. */
const rpcSystems: Record<WireProtocol, string> = { rest: "connect_rpc", connect: "connect_rpc", grpc: "grpc", "grpc-web": "grpc" };

/**
 * Starts the OpenTelemetry SDK for traces only (metrics stay with Prometheus, logs on stdout): the
 * exporter, protocol, sampler and resource come from the standard OTEL_* variables. PostgreSQL
 * statements become child spans of the call that issued them through the pg instrumentation;
 * statements no call issued (job polling, migrations) make no trace of their own.
 */
export async function startSdk(): Promise<Tracing> {
  const named = process.env.OTEL_SERVICE_NAME !== undefined || /(^|,)\s*service\.name\s*=/.test(process.env.OTEL_RESOURCE_ATTRIBUTES ?? "");
  // Statement text only (parameters hold personal data): the instrumentation's default.
  const postgres = new PgInstrumentation({ requireParentSpan: true });
  const sdk = new NodeSDK({
    serviceName: named ? undefined : defaultServiceName,
    instrumentations: [postgres],
    metricReaders: [],
    logRecordProcessors: [],
  });
  sdk.start();
  // pg was imported as an ES module before the SDK started (under tsx not even into require's cache),
  // which neither of the instrumentation's hooks sees: its definition patches the very module every
  // import shares instead, whose Client's prototype the pool's connections use.
  const pg = await import("pg");
  for (const definition of postgres.getModuleDefinitions()) if (definition.name === "pg") definition.patch?.(pg);
  const tracer = trace.getTracer(defaultServiceName);

  return {
    begin(httpMethod: string | undefined, headers: IncomingHttpHeaders, record: RequestRecord): CallSpan {
      const parent = propagation.extract(ROOT_CONTEXT, headers);
      // Named once routed; a request no route takes keeps its HTTP method as its name.
      const span = tracer.startSpan(httpMethod ?? "HTTP", { kind: SpanKind.SERVER }, parent);
      const ids = span.spanContext();
      if (isSpanContextValid(ids)) {
        record.traceId = ids.traceId;
        record.spanId = ids.spanId;
      }
      const current = trace.setSpan(parent, span);
      return {
        run: (serve) => context.with(current, serve),
        end(status: number) {
          const rpc = procedurePattern.exec(record.procedure ?? "");
          if (rpc !== null) {
            span.updateName(`${rpc[1]}/${rpc[2]}`);
            span.setAttributes({ "rpc.system": rpcSystems[record.protocol], "rpc.service": rpc[1], "rpc.method": rpc[2] });
          } else if (record.procedure !== undefined) {
            span.updateName(`${httpMethod ?? "HTTP"} ${record.procedure}`);
          }
          span.setAttributes({
            "http.request.method": httpMethod ?? "_OTHER",
            "http.response.status_code": status,
            "payment_service.protocol": record.protocol,
            "payment_service.request_id": record.id,
          });
          if (record.code !== undefined) span.setAttribute("error.type", record.code);
          // A server's span fails on its own faults only; a refused request is the client's.
          if (record.code === "HE_00" || status >= 500) span.setStatus({ code: SpanStatusCode.ERROR, message: record.code });
          span.end();
        },
      };
    },
    shutdown: () => sdk.shutdown(),
  };
}
