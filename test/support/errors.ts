import { Code, ConnectError } from "@connectrpc/connect";
import { expect } from "vitest";
import { ErrorDetailSchema } from "../../gen/paymentservice/v1/error_pb.js";
import type { RestResponse } from "./clients.js";

/**
 * Each code's error type, HTTP status and Connect/gRPC code as docs/api-conventions.md documents
 * them, written out here rather than taken from src/ so that a wrong catalogue entry fails the tests.
 */
export const documentedErrors = {
  IR_00: { type: "invalid_request", http: 501, rpc: Code.Unimplemented },
  IR_01: { type: "authentication_error", http: 401, rpc: Code.Unauthenticated },
  IR_02: { type: "invalid_request", http: 404, rpc: Code.NotFound },
  IR_03: { type: "invalid_request", http: 405, rpc: Code.Unimplemented },
  IR_04: { type: "invalid_request", http: 400, rpc: Code.InvalidArgument },
  IR_05: { type: "invalid_request", http: 400, rpc: Code.InvalidArgument },
  IR_06: { type: "invalid_request", http: 400, rpc: Code.InvalidArgument },
  IR_13: { type: "invalid_request", http: 400, rpc: Code.FailedPrecondition },
  IR_14: { type: "invalid_request", http: 400, rpc: Code.FailedPrecondition },
  IR_16: { type: "invalid_request", http: 400, rpc: Code.FailedPrecondition },
  IR_22: { type: "authentication_error", http: 403, rpc: Code.PermissionDenied },
  HE_00: { type: "api_error", http: 500, rpc: Code.Internal },
  HE_01: { type: "invalid_request", http: 409, rpc: Code.AlreadyExists },
  HE_02: { type: "invalid_request", http: 404, rpc: Code.NotFound },
  IK_01: { type: "idempotency_error", http: 409, rpc: Code.Aborted },
  IK_02: { type: "idempotency_error", http: 422, rpc: Code.InvalidArgument },
  RL_01: { type: "rate_limit_error", http: 429, rpc: Code.ResourceExhausted },
  TO_01: { type: "timeout_error", http: 504, rpc: Code.DeadlineExceeded },
  SU_01: { type: "api_error", http: 503, rpc: Code.Unavailable },
} as const;

/** A documented error code. */
export type DocumentedCode = keyof typeof documentedErrors;

/**
 * Asserts a REST error response: the documented status and `{error: {type, code, message, request_id}}`
 * body, whose request_id is the answer's X-Request-Id. Returns the message so a test can check that
 * it names a field.
 */
export function expectRestError(res: RestResponse, status: number, code: DocumentedCode): string {
  expect({ status: res.status, code: res.body?.error?.code }).toEqual({ status, code });
  expect(res.body.error.type).toBe(documentedErrors[code].type);
  expect(typeof res.body.error.message).toBe("string");
  expect(res.body.error.request_id).toBe(res.headers.get("x-request-id"));
  return res.body.error.message as string;
}

/**
 * Asserts a REST error as expectRestError does, and that the body holds nothing else; the message must
 * name `mention` when given. Returns the message.
 */
export function expectExactRestError(res: RestResponse, status: number, code: DocumentedCode, mention?: string): string {
  const message = expectRestError(res, status, code);
  expect(res.body).toEqual({ error: { type: documentedErrors[code].type, code, message, request_id: res.headers.get("x-request-id") } });
  if (mention !== undefined) expect(message).toContain(mention);
  return message;
}

/**
 * Asserts that an RPC fails with the given Connect code and carries the documented ErrorDetail,
 * naming the request as its X-Request-Id header does. Returns the detail's message.
 */
export async function expectRpcError(call: Promise<unknown>, connectCode: Code, code: DocumentedCode): Promise<string> {
  const error = await call.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(ConnectError);
  const connectError = error as ConnectError;
  const detail = connectError.findDetails(ErrorDetailSchema)[0];
  expect({ connectCode: connectError.code, code: detail?.code, type: detail?.type, requestId: detail?.requestId }).toEqual({
    connectCode,
    code,
    type: documentedErrors[code].type,
    // In-process calls (test/in-process) pass no port, which is what names a request.
    requestId: connectError.metadata.get("x-request-id") ?? "",
  });
  return detail!.message;
}
