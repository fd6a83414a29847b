import { fromBinary } from "@bufbuild/protobuf";
import { expect } from "vitest";
import { ErrorDetailSchema } from "../../gen/paymentservice/v1/error_pb.js";
import type { JsonBody } from "../support/clients.js";
import type { TestMerchant } from "../support/merchant.js";

/*
 * The scenario every client family runs against the service (issue 17): the same calls and checks,
 * whatever library makes them. Messages are in proto JSON terms (camelCase fields, enum value names,
 * 64-bit integers as strings), which Connect JSON and buf curl speak as they are and grpc-js speaks
 * with proto-loader's `longs: String, enums: String`.
 */

/** The documented error object a failed call carries as its detail. */
export interface ErrorDetailJson {
  readonly type: string;
  readonly code: string;
  readonly message: string;
}

/** What a unary call came to, as the scenario checks it. */
export type CallResult =
  | { readonly ok: true; readonly message: JsonBody; readonly replayed: boolean | undefined }
  | { readonly ok: false; readonly code: string; readonly message: string; readonly detail: ErrorDetailJson | undefined };

/** One client family: how it calls a method (`package.Service/Method`) with headers sent as metadata. */
export interface ClientFamily {
  /**
   * Set when the client looks a method up in the server's reflection before it sends anything (buf
   * curl): a method the service does not serve is then refused by the client, with this code.
   */
  readonly unknownMethodRefusal?: string;
  /** A unary call; `replayed` is the idempotent-replayed header where the family shows headers. */
  call(method: string, request: JsonBody, headers: Record<string, string>): Promise<CallResult>;
  /** The first message of a server stream, after which the stream is cancelled. */
  firstOfStream(method: string, request: JsonBody, headers: Record<string, string>): Promise<JsonBody>;
}

/** The documented error detail in a Connect-style error's `details` (JSON `{type, value}` with base64 value). */
export function errorDetailOf(details: readonly { type: string; value: string }[] | undefined): ErrorDetailJson | undefined {
  const found = details?.find((detail) => detail.type === "paymentservice.v1.ErrorDetail");
  if (found === undefined) return undefined;
  const { type, code, message } = fromBinary(ErrorDetailSchema, Buffer.from(found.value, "base64"));
  return { type, code, message };
}

const card = { cardNumber: "4242424242424242", cardExpMonth: "12", cardExpYear: "2035", cardCvc: "123" };

async function succeeded(family: ClientFamily, method: string, request: JsonBody, headers: Record<string, string>): Promise<JsonBody> {
  const result = await family.call(method, request, headers);
  if (!result.ok) throw new Error(`${method} failed: ${result.code} ${result.message}`);
  return result.message;
}

/**
 * Runs the scenario: a customer, a payment created with confirm, a manual-capture payment captured,
 * a partial refund that succeeds, a list with a status filter, a validation error with its decoded
 * ErrorDetail, an idempotent replay, an unknown method, a health check without a key, and the event
 * stream followed from a saved event id.
 */
export async function runClientScenario(family: ClientFamily, merchant: TestMerchant): Promise<void> {
  const key = { "api-key": merchant.apiKey };
  const payments = "paymentservice.v1.PaymentService/";

  const customer = await succeeded(family, "paymentservice.v1.CustomerService/CreateCustomer", { email: "jane@example.com" }, key);
  expect(customer.customerId).toMatch(/^cus_/);

  const paid = await succeeded(
    family,
    `${payments}CreatePayment`,
    {
      amount: 1000,
      currency: "USD",
      profileId: merchant.profileId,
      customerId: customer.customerId,
      confirm: true,
      paymentMethodData: { card },
    },
    key,
  );
  expect([paid.status, String(paid.amountReceived), paid.customerId]).toEqual(["PAYMENT_STATUS_SUCCEEDED", "1000", customer.customerId]);

  const held = await succeeded(
    family,
    `${payments}CreatePayment`,
    {
      amount: 2500,
      currency: "EUR",
      profileId: merchant.profileId,
      confirm: true,
      captureMethod: "CAPTURE_METHOD_MANUAL",
      paymentMethodData: { card },
    },
    key,
  );
  expect([held.status, String(held.amountCapturable)]).toEqual(["PAYMENT_STATUS_REQUIRES_CAPTURE", "2500"]);
  const captured = await succeeded(family, `${payments}CapturePayment`, { paymentId: held.paymentId }, key);
  expect([captured.status, String(captured.amountReceived)]).toEqual(["PAYMENT_STATUS_SUCCEEDED", "2500"]);

  let refund = await succeeded(family, "paymentservice.v1.RefundService/CreateRefund", { paymentId: paid.paymentId, amount: 300 }, key);
  expect([String(refund.amount), refund.paymentId]).toEqual(["300", paid.paymentId]);
  // An instant refund is answered pending and succeeds once the processor has it, within moments.
  for (let tries = 0; refund.status === "REFUND_STATUS_PENDING" && tries < 150; tries++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    refund = await succeeded(family, "paymentservice.v1.RefundService/RetrieveRefund", { refundId: refund.refundId }, key);
  }
  expect(refund.status).toBe("REFUND_STATUS_SUCCEEDED");

  const listed = await succeeded(family, `${payments}ListPayments`, { status: "PAYMENT_STATUS_SUCCEEDED" }, key);
  expect(Number(listed.totalCount)).toBe(2);
  expect(listed.data.map((p: JsonBody) => [p.paymentId, p.status]).sort()).toEqual(
    [
      [paid.paymentId, "PAYMENT_STATUS_SUCCEEDED"],
      [held.paymentId, "PAYMENT_STATUS_SUCCEEDED"],
    ].sort(),
  );

  const invalid = await family.call(`${payments}CreatePayment`, { currency: "USD", profileId: merchant.profileId }, key);
  expect(invalid).toEqual({
    ok: false,
    code: "invalid_argument",
    message: "Missing required field: amount",
    detail: { type: "invalid_request", code: "IR_04", message: "Missing required field: amount" },
  });

  const replayKey = { ...key, "x-idempotency-key": `scenario-${merchant.merchantId}` };
  const order = { amount: 700, currency: "GBP", profileId: merchant.profileId };
  const first = await family.call(`${payments}CreatePayment`, order, replayKey);
  const again = await family.call(`${payments}CreatePayment`, order, replayKey);
  if (!first.ok || !again.ok) throw new Error("an idempotent create failed");
  expect(again.message).toEqual(first.message);
  if (again.replayed !== undefined) expect([first.replayed, again.replayed]).toEqual([false, true]);

  const unknown = await family.call(`${payments}RefundEverything`, { paymentId: paid.paymentId }, key);
  expect(unknown.ok ? "answered" : unknown.code).toBe(family.unknownMethodRefusal ?? "unimplemented");

  // Probes send no API key.
  expect(await succeeded(family, "grpc.health.v1.Health/Check", {}, {})).toEqual({ status: "SERVING" });

  const newest = await succeeded(family, "paymentservice.v1.EventService/ListEvents", { limit: 1 }, key);
  const saved = newest.data[0].eventId as string;
  expect(saved).toMatch(/^evt_/);
  const later = await succeeded(family, `${payments}CreatePayment`, { amount: 400, currency: "USD", profileId: merchant.profileId }, key);
  const event = await family.firstOfStream("paymentservice.v1.EventService/StreamEvents", { afterEventId: saved }, key);
  expect([event.type, event.data.object.payment_id]).toEqual(["payment.requires_payment_method", later.paymentId]);
}
