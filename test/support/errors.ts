import { ConnectError, type Code } from "@connectrpc/connect";
import { expect } from "vitest";
import { ErrorDetailSchema } from "../../gen/paymentservice/v1/error_pb.js";
import type { RestResponse } from "./clients.js";

/**
 * The error type of each code as decisions §5 documents it, written out here rather than taken from
 * src/ so that a wrong catalogue entry fails the tests.
 */
export const documentedErrorType = {
  IR_00: "invalid_request",
  IR_01: "authentication_error",
  IR_02: "invalid_request",
  IR_03: "invalid_request",
  IR_04: "invalid_request",
  IR_05: "invalid_request",
  IR_06: "invalid_request",
  IR_13: "invalid_request",
  IR_14: "invalid_request",
  IR_16: "invalid_request",
  IR_22: "authentication_error",
  HE_00: "api_error",
  HE_01: "invalid_request",
  HE_02: "invalid_request",
  IK_01: "idempotency_error",
  IK_02: "idempotency_error",
  RL_01: "rate_limit_error",
  TO_01: "timeout_error",
  SU_01: "api_error",
} as const;

/** A documented error code. */
export type DocumentedCode = keyof typeof documentedErrorType;

/**
 * Asserts a REST error response: the documented status and `{error: {type, code, message, request_id}}`
 * body, whose request_id is the answer's X-Request-Id. Returns the message so a test can check that
 * it names a field.
 */
export function expectRestError(res: RestResponse, status: number, code: DocumentedCode): string {
  expect({ status: res.status, code: res.body?.error?.code }).toEqual({ status, code });
  expect(res.body.error.type).toBe(documentedErrorType[code]);
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
  expect(res.body).toEqual({ error: { type: documentedErrorType[code], code, message, request_id: res.headers.get("x-request-id") } });
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
    type: documentedErrorType[code],
    // In-process calls (test/in-process) pass no port, which is what names a request.
    requestId: connectError.metadata.get("x-request-id") ?? "",
  });
  return detail!.message;
}
