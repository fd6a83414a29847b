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
  /** Sent to the client as X-Request-Id and in an HE_00 message. */
  readonly id = newId("req");
  readonly startedAt = performance.now();
  /** Decides the shape of an error answer; REST until the request is known to be an RPC. */
  protocol: WireProtocol = "rest";
  /** `/package.Service/Method`, once the request is routed to one. */
  procedure: string | undefined;
  /** The documented code of the error answered, if one was. */
  code: ErrorCode | undefined;
  /** Why HE_00 was answered: kept for the log, never sent. */
  cause: unknown;

  /** Records a documented error answered to this request (and the cause of an HE_00). */
  answered(code: ErrorCode | undefined, cause?: unknown): void {
    this.code = code;
    if (code === "HE_00") this.cause = cause;
  }

  /** Writes the request's log line: identifiers and outcome only, never a body (it may hold card data). */
  log(httpMethod: string | undefined, path: string, status: number, complete: boolean): void {
    const fields = {
      request_id: this.id,
      protocol: this.protocol,
      method: httpMethod,
      ...(this.procedure === undefined ? { path: redactCardNumbers(path) } : { procedure: this.procedure }),
      status,
      code: this.code,
      ms: Math.round((performance.now() - this.startedAt) * 10) / 10,
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

/** Where interceptors find the record of the request they serve. */
export const requestRecordKey = createContextKey<RequestRecord | undefined>(undefined, { description: "the request being served" });

/** The context values an admitted call starts with: its record and its caller. */
export function callValues(record: RequestRecord, caller: Caller | undefined): ContextValues {
  return createContextValues().set(requestRecordKey, record).set(callerKey, caller);
}
