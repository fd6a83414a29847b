import { Code } from "@connectrpc/connect";
import { redactCardNumbers } from "./card-numbers.js";

/**
 * The documented error catalogue (decisions §5): one row per code, so that a code always carries the
 * same type, HTTP status and Connect code on every protocol.
 */
export const errorCatalogue = {
  IR_00: { type: "invalid_request", httpStatus: 501, connectCode: Code.Unimplemented },
  IR_01: { type: "authentication_error", httpStatus: 401, connectCode: Code.Unauthenticated },
  IR_02: { type: "invalid_request", httpStatus: 404, connectCode: Code.NotFound },
  IR_03: { type: "invalid_request", httpStatus: 405, connectCode: Code.Unimplemented },
  IR_04: { type: "invalid_request", httpStatus: 400, connectCode: Code.InvalidArgument },
  IR_05: { type: "invalid_request", httpStatus: 400, connectCode: Code.InvalidArgument },
  IR_06: { type: "invalid_request", httpStatus: 400, connectCode: Code.InvalidArgument },
  IR_13: { type: "invalid_request", httpStatus: 400, connectCode: Code.FailedPrecondition },
  IR_14: { type: "invalid_request", httpStatus: 400, connectCode: Code.FailedPrecondition },
  IR_16: { type: "invalid_request", httpStatus: 400, connectCode: Code.FailedPrecondition },
  IR_22: { type: "authentication_error", httpStatus: 403, connectCode: Code.PermissionDenied },
  HE_00: { type: "api_error", httpStatus: 500, connectCode: Code.Internal },
  HE_01: { type: "invalid_request", httpStatus: 409, connectCode: Code.AlreadyExists },
  HE_02: { type: "invalid_request", httpStatus: 404, connectCode: Code.NotFound },
  IK_01: { type: "idempotency_error", httpStatus: 409, connectCode: Code.Aborted },
  IK_02: { type: "idempotency_error", httpStatus: 422, connectCode: Code.InvalidArgument },
  RL_01: { type: "rate_limit_error", httpStatus: 429, connectCode: Code.ResourceExhausted },
  TO_01: { type: "timeout_error", httpStatus: 504, connectCode: Code.DeadlineExceeded },
  SU_01: { type: "api_error", httpStatus: 503, connectCode: Code.Unavailable },
} as const;

/** A code of the documented error catalogue. */
export type ErrorCode = keyof typeof errorCatalogue;

/** Longest error message: one quoting what a client sent (an unknown key, a path) never grows with it. */
const maxMessageLength = 1000;

/**
 * An error the caller is meant to see, with its documented code. Anything else thrown by a handler
 * is an internal failure and reaches the caller as HE_00 without details. Its message never grows
 * with the request, and never holds a card number, whatever a check quoted from the request.
 */
export class ApiError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    const redacted = redactCardNumbers(message);
    super(redacted.length > maxMessageLength ? `${redacted.slice(0, maxMessageLength - 1).replace(/[\uD800-\uDBFF]$/, "")}…` : redacted);
    this.name = "ApiError";
  }

  /** The documented type of this error, e.g. invalid_request. */
  get type(): string {
    return errorCatalogue[this.code].type;
  }
}

/**
 * How an error message refers to a value a client sent: its type for structures, the value itself
 * only when it cannot be card data. Anything with a run of three digits may be a misplaced card
 * number or CVC (decisions §4), and messages reach clients and logs.
 */
export function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  const text = String(value);
  if (/[0-9]{3}/.test(text)) return `a ${typeof value === "bigint" ? "number" : typeof value}`;
  return typeof value === "string" ? JSON.stringify(value) : text;
}

/*
 * One constructor per kind of error, as Hyperswitch's ApiErrorResponse has one variant per kind: the
 * code and the message template of each kind live here only, and call sites pass the facts.
 */

/** IR_04: a required field is absent. */
export function missingField(field: string): ApiError {
  return new ApiError("IR_04", `Missing required field: ${field}`);
}

/**
 * IR_05 (or the code the field's proto declares): a field is present but its value is not
 * acceptable.
 */
export function invalidField(field: string, expectation: string, code: ErrorCode = "IR_05"): ApiError {
  return new ApiError(code, `Invalid value for field ${field}: ${expectation}`);
}

/** IR_06: the request as a whole is malformed (unknown field, bad JSON, bad list limit). */
export function invalidRequest(message: string): ApiError {
  return new ApiError("IR_06", message);
}

/**
 * HE_02: the object does not exist for this merchant and environment (or belongs to another). When
 * the id came from a request field rather than the path, `field` names it.
 */
export function notFound(what: string, id: string, field?: string): ApiError {
  return new ApiError("HE_02", `${what} not found: ${id}${field === undefined ? "" : ` (field ${field})`}`);
}

/** HE_01: a caller-supplied id is already taken. */
export function alreadyExists(what: string, idField: string, id: string): ApiError {
  return new ApiError("HE_01", `A ${what} with ${idField} ${id} already exists`);
}

/** What an operation found and expected when an object's status does not allow it. */
export interface UnexpectedState {
  /** "payment", "refund", … */
  readonly object: string;
  /** The operation in the past tense, as the message says it: "captured", "given evidence". */
  readonly action: string;
  readonly status: string;
  readonly expected: readonly string[];
  /** IR_14 for captures and refunds of a payment (decisions §5), IR_16 for every other operation. */
  readonly code: "IR_14" | "IR_16";
}

/**
 * IR_14/IR_16: the object's status does not allow the operation (Hyperswitch's
 * PaymentUnexpectedState); the message names the current and the expected statuses.
 */
export function unexpectedState(state: UnexpectedState): ApiError {
  return new ApiError(
    state.code,
    `This ${state.object} cannot be ${state.action} because its status is ${state.status}; expected ${state.expected.join(" or ")}`,
  );
}

/** IR_16: a rule other than the object's status stops the operation (an open dispute, an expired card). */
export function preconditionFailed(message: string): ApiError {
  return new ApiError("IR_16", message);
}

/**
 * IR_16: production keys need a configured real processor, and none can be configured yet
 * (decisions §3 documents the code).
 */
export function noProcessorConfigured(kind: "payment" | "payout"): ApiError {
  return new ApiError("IR_16", `No ${kind} processor is configured for production; use a sandbox key or configure a processor`);
}

/** IR_13: a refund would take back more than is left of what was captured. */
export function refundExceedsCaptured(requested: bigint | undefined, left: bigint): ApiError {
  return new ApiError(
    "IR_13",
    requested === undefined || left === 0n
      ? "Nothing is left to refund on this payment"
      : `The refund amount ${requested} exceeds what is left to refund on this payment (${left})`,
  );
}

/** IR_01: no usable credentials (missing, unknown, revoked or expired key). */
export function unauthenticated(message: string): ApiError {
  return new ApiError("IR_01", message);
}

/** IR_22: the credentials are valid but not for this operation or object. */
export function forbidden(message: string): ApiError {
  return new ApiError("IR_22", message);
}

/** IR_02: no route has this path. */
export function unrecognizedUrl(method: string, path: string): ApiError {
  return new ApiError("IR_02", `Unrecognized request URL: ${method} ${path}`);
}

/** IR_03, with the methods the path does allow, for the Allow header HTTP requires on a 405. */
export class MethodNotAllowedError extends ApiError {
  constructor(
    method: string,
    path: string,
    readonly allowed: string[],
  ) {
    super("IR_03", `Method ${method} is not allowed on ${path}; allowed: ${allowed.join(", ")}`);
  }
}

/** IR_00: the operation is defined in the API but not built yet. */
export function notImplemented(operation: string): ApiError {
  return new ApiError("IR_00", `${operation}: this operation is not available yet`);
}

/** IK_01: the key's first request has not finished, or a retry took its claim over. */
export function idempotencyConflict(message: string): ApiError {
  return new ApiError("IK_01", message);
}

/**
 * IK_01: the request outlived its claim on an object (src/db/claims.ts) and another request took the
 * object over, as a retry takes over an idempotency key whose lease ran out: its outcome was not kept.
 */
export function claimLost(object: string, id: string): ApiError {
  return new ApiError(
    "IK_01",
    `This request ran longer than its claim on ${object} ${id}, and another request took the ${object} over; its outcome was not kept. Retry to learn the ${object}'s state.`,
  );
}

/** IK_02: the key was used for another request. */
export function idempotencyKeyReused(): ApiError {
  return new ApiError("IK_02", "This idempotency key was already used for a different request (another operation, path or body)");
}

/** What an RL_01 limit counts (docs/rate-limits.md), so the message says which limit was used up. */
export type LimitedCounter = "api_key" | "failed_authentication" | "admin" | "card_testing";

const limitedWhat: Record<LimitedCounter, string> = {
  api_key: "requests per minute exceeded for this API key",
  failed_authentication: "failed authentications per minute exceeded for this client address",
  admin: "admin API requests per minute exceeded for this client address",
  card_testing: "card tokenizations and confirmations per minute with a publishable key exceeded for this client address",
};

/**
 * RL_01: a limit of this minute is used up: the key's requests, an address's failed authentications,
 * its admin calls or its card tokenizations and confirmations with a publishable key.
 */
export function rateLimited(limit: number, retryAfterSeconds: number, counter: LimitedCounter = "api_key"): ApiError {
  return new ApiError("RL_01", `Rate limit of ${limit} ${limitedWhat[counter]}; retry after ${retryAfterSeconds} s`);
}

/** TO_01: the client's deadline passed before the call finished; the call may still complete. */
export function deadlineExceeded(): ApiError {
  return new ApiError(
    "TO_01",
    "The deadline the client set (grpc-timeout or connect-timeout-ms) passed before the call completed; " +
      "a call that had started may still complete: retry with the same idempotency key to learn its outcome",
  );
}

/**
 * SU_01: the database cannot serve the call now (restarting, down, or not answering within its
 * timeouts). What the call was doing may or may not have committed, so the message says how to learn.
 */
export function serviceUnavailable(): ApiError {
  return new ApiError(
    "SU_01",
    "The service's database is unavailable or did not answer in time; retry in a moment. A call that changes something may have taken effect: " +
      "retry it with the same idempotency key to learn its outcome",
  );
}

/** HE_00: a failure of ours; the message carries the request's id for the logs. */
export function internalError(requestId: string | undefined): ApiError {
  const reference = requestId === undefined ? "" : ` (request ${requestId})`;
  return new ApiError("HE_00", `Something went wrong on our side; the request may be retried${reference}.`);
}
