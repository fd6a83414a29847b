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

/** IR_04: a required field is absent. */
export function missingField(field: string): ApiError {
  return new ApiError("IR_04", `Missing required field: ${field}`);
}

/** IR_05: a field is present but its value is not acceptable. */
export function invalidField(field: string, expectation: string): ApiError {
  return new ApiError("IR_05", `Invalid value for field ${field}: ${expectation}`);
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
