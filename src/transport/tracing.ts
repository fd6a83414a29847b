import type { IncomingHttpHeaders } from "node:http";
import type { RequestRecord } from "./request-record.js";

/** One call's server span, open while the call is served. */
export interface CallSpan {
  /** Runs the serving of the call with its span current, so the database's spans become its children. */
  run<T>(serve: () => T): T;
  /** Ends the span with the outcome the record holds and the HTTP status answered. */
  end(status: number): void;
}

/** What the port needs of OpenTelemetry: a server span per call. Undefined when tracing is off. */
export interface Tracing {
  /**
   * Opens the span of a call that has just arrived, continuing the caller's trace when its headers
   * carry a W3C traceparent, and notes the trace and span ids on its record for the log line.
   */
  begin(httpMethod: string | undefined, headers: IncomingHttpHeaders, record: RequestRecord): CallSpan;
  /** Sends the spans still buffered and stops: spans of the last calls before a stop are not lost. */
  shutdown(): Promise<void>;
}

/**
 * Starts OpenTelemetry when `endpoint` is set (config.tracesEndpoint). The SDK is imported only then,
 * so an instance that does not trace never loads it and its calls pay nothing for it.
 */
export async function startTracing(endpoint: string | undefined): Promise<Tracing | undefined> {
  if (endpoint === undefined) return undefined;
  const { startSdk } = await import("./trace-sdk.js");
  return await startSdk();
}
