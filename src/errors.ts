import { Code } from "@connectrpc/connect";

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
} as const;

/** A code of the documented error catalogue. */
export type ErrorCode = keyof typeof errorCatalogue;

/**
 * An error the caller is meant to see, with its documented code. Anything else thrown by a handler
 * is an internal failure and reaches the caller as HE_00 without details.
 */
export class ApiError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "ApiError";
  }

  /** The documented type of this error, e.g. invalid_request. */
  get type(): string {
    return errorCatalogue[this.code].type;
  }
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
