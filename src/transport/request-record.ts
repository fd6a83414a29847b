import { createContextKey, createContextValues, type ContextValues } from "@connectrpc/connect";
import { callerKey, type Caller } from "../auth/caller.js";
import type { ErrorCode } from "../errors.js";
import { newId } from "../ids.js";
import { log } from "../log.js";
import { redactCardNumbers } from "../card-numbers.js";
import type { WireProtocol } from "./protocol.js";

/**
 * What the port learns about one request while serving it, whoever answers it (the transport, the
 * transcoder, an interceptor): written as one log line when the request ends, so every request is
 * logged exactly once, with the cause of a failure of ours next to the request id its client got.
 */
export class RequestRecord {
  readonly startedAt = performance.now();
  /** Decides the shape of an error answer; REST until the request is known to be an RPC. */
  protocol: WireProtocol = "rest";
  /** `/package.Service/Method`, once the request is routed to one. */
  procedure: string | undefined;
  /** The documented code of the error answered, if one was. */
  code: ErrorCode | undefined;
  /** Why HE_00 was answered: kept for the log, never sent. */
  cause: unknown;
  /** Who the call was admitted for, once it was: the merchant and key its line names. */
  caller: Caller | undefined;
  /** The OpenTelemetry trace and span of the call, when tracing is on: its log line names them, to find one from the other. */
  traceId: string | undefined;
  spanId: string | undefined;

  /** `id` is sent to the client as X-Request-Id and in an HE_00 message: the client's own (requestIdOf) or a new one. */
  constructor(readonly id: string = newId("req")) {}

  /** Records a documented error answered to this request (and the cause of an HE_00). */
  answered(code: ErrorCode | undefined, cause?: unknown): void {
    this.code = code;
    if (code === "HE_00") this.cause = cause;
  }

  /** Time since the request arrived, in milliseconds to a tenth: the line's `ms` and the latency metric's observation. */
  durationMs(): number {
    return Math.round((performance.now() - this.startedAt) * 10) / 10;
  }

  /** Writes the request's log line: identifiers and outcome only, never a body (it may hold card data). */
  log(httpMethod: string | undefined, target: string, status: number, complete: boolean): void {
    const merchant = this.caller?.kind === "merchant" ? this.caller : undefined;
    const fields = {
      request_id: this.id,
      protocol: this.protocol,
      method: httpMethod,
      ...(this.procedure === undefined ? { path: unroutedPath(target) } : { procedure: this.procedure }),
      status,
      code: this.code,
      merchant_id: merchant?.merchantId,
      key_id: merchant?.keyId ?? (this.caller?.kind === "admin" ? "admin" : undefined),
      ms: this.durationMs(),
      trace_id: this.traceId,
      span_id: this.spanId,
      ...(complete ? {} : { cut: true }),
    };
    if (this.code === "HE_00") {
      const cause = this.cause instanceof Error ? (this.cause.stack ?? this.cause.message) : String(this.cause);
      log.error("request failed", { ...fields, cause });
    } else {
      log.info("request", fields);
    }
  }
}

/** Longest path of a request no route took that its log line keeps: enough to see what was asked for. */
const loggedPathLength = 200;

/**
 * The path of a request no route took, as its log line shows it: without the query string (a
 * client's data, card fields included, may be in it), percent-decoded, any card number replaced,
 * cut to a length.
 */
function unroutedPath(target: string): string {
  const path = target.split("?", 1)[0]!;
  return redactCardNumbers(percentDecoded(path.length > loggedPathLength ? `${path.slice(0, loggedPathLength)}…` : path));
}

/** A path as it reads once decoded, so a card number spelt `4242%204242…` is recognised; as sent when it does not decode. */
function percentDecoded(path: string): string {
  try {
    return decodeURIComponent(path);
  } catch {
    return path;
  }
}

/**
 * An X-Request-Id a client may choose: a short token of letters, digits and `._:-`, which can be
 * quoted in a message and a log line as it is; one that looks like a card number never is.
 */
const clientRequestId = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The id of a request: the client's X-Request-Id when it is a sane token (so a caller can follow
 * its own id through our answer and log), a new one otherwise.
 */
export function requestIdOf(header: string | string[] | undefined): string {
  return typeof header === "string" && clientRequestId.test(header) && redactCardNumbers(header) === header ? header : newId("req");
}

/** Where interceptors find the record of the request they serve. */
export const requestRecordKey = createContextKey<RequestRecord | undefined>(undefined, { description: "the request being served" });

/** The context values an admitted call starts with: its record and its caller. */
export function callValues(record: RequestRecord, caller: Caller | undefined): ContextValues {
  return createContextValues().set(requestRecordKey, record).set(callerKey, caller);
}
