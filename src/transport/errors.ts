import { Code, ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { ErrorDetailSchema } from "../../gen/paymentservice/v1/error_pb.js";
import { ApiError, errorCatalogue, type ErrorCode } from "../errors.js";

/** The documented error body as REST clients receive it. */
export interface RestErrorBody {
  error: { type: string; code: string; message: string };
}

/**
 * Turns anything a handler threw into the ConnectError clients receive. Our ApiErrors keep their
 * code as an ErrorDetail; anything else is an internal failure whose details stay in the log.
 */
export function toConnectError(reason: unknown): ConnectError {
  if (reason instanceof ApiError) {
    const row = errorCatalogue[reason.code];
    return new ConnectError(reason.message, row.connectCode, undefined, [
      { desc: ErrorDetailSchema, value: create(ErrorDetailSchema, { type: row.type, code: reason.code, message: reason.message }) },
    ]);
  }
  if (reason instanceof ConnectError && reason.findDetails(ErrorDetailSchema).length > 0) {
    return reason;
  }
  if (reason instanceof ConnectError && reason.code === Code.Unimplemented) {
    return toConnectError(new ApiError("IR_00", `${reason.rawMessage}: this operation is not available yet`));
  }
  if (reason instanceof ConnectError && reason.code !== Code.Internal && reason.code !== Code.Unknown) {
    // Protocol-level rejections by connect itself (bad envelope, unsupported codec) keep their code.
    return reason;
  }
  const internal = toConnectError(new ApiError("HE_00", "Something went wrong on our side; the request may be retried."));
  // Kept for the log line of the outcome interceptor, never sent.
  internal.cause = reason;
  return internal;
}

/** The REST status and body for an error that reached the REST layer as a ConnectError. */
export function toRestError(error: ConnectError): { status: number; body: RestErrorBody } {
  const detail = error.findDetails(ErrorDetailSchema)[0];
  if (detail !== undefined && detail.code in errorCatalogue) {
    const row = errorCatalogue[detail.code as ErrorCode];
    return { status: row.httpStatus, body: { error: { type: detail.type, code: detail.code, message: detail.message } } };
  }
  const status = error.code === Code.InvalidArgument ? 400 : 500;
  const code: ErrorCode = status === 400 ? "IR_06" : "HE_00";
  return { status, body: { error: { type: errorCatalogue[code].type, code, message: error.rawMessage } } };
}

/** The REST status and body for an ApiError raised by the REST layer itself (routing, JSON). */
export function restErrorOf(error: ApiError): { status: number; body: RestErrorBody } {
  return {
    status: errorCatalogue[error.code].httpStatus,
    body: { error: { type: error.type, code: error.code, message: error.message } },
  };
}
