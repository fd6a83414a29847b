import { Code, type Client } from "@connectrpc/connect";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { CaptureMethod, NextActionType, PaymentService, PaymentStatus } from "../../gen/paymentservice/v1/payment_pb.js";
import { expectRpcError } from "../support/errors.js";
import { inProcessSuite } from "../support/in-process.js";
import { ScriptedProcessor } from "../support/scripted-processor.js";
import type { AuthorizeResult } from "../../src/processors/processor.js";

/*
 * Payments through the router transport and the app's interceptors, on a real (embedded or
 * PostgreSQL) database, with a scripted processor in place of the sandbox: each test says what the
 * client observes and what the processor was asked. The processor is registered as "scripted", not
 * "sandbox", so a capture or cancel reaching it shows the step went to the processor the payment
 * recorded when it was authorized.
 */

const processor = new ScriptedProcessor("scripted");
const suite = inProcessSuite(processor);
let payments: Client<typeof PaymentService>;

beforeEach(() => {
  payments = suite.client(PaymentService);
});

/** A Luhn-valid card the sandbox refuses: accepting it at all is this processor's decision. */
const card = { cardNumber: "4000056655665556", cardExpMonth: "12", cardExpYear: "2031", cardCvc: "123", cardHolderName: "Ada Lovelace" };

/** Creates and confirms a payment of 1250 EUR with `card`, capturing at once unless `manual`. */
function confirmedPayment(options: { manual?: boolean; paymentId?: string } = {}) {
  return payments.createPayment({
    amount: 1250n,
    currency: "EUR",
    profileId: suite.merchant.profileId,
    paymentId: options.paymentId,
    confirm: true,
    captureMethod: options.manual === true ? CaptureMethod.MANUAL : undefined,
    paymentMethodData: { card },
  });
}

describe("create and confirm", () => {
  it("sends the amount, currency, card and the payment's idempotency key to the processor, and answers succeeded", async () => {
    const payment = await confirmedPayment({ paymentId: "pay_inproc_order_1" });

    expect(processor.calls.map((call) => call.method)).toEqual(["authorize"]);
    expect(processor.callsTo("authorize")[0]).toEqual({
      idempotencyKey: `${suite.merchant.merchantId}:pay_inproc_order_1:authorize`,
      amount: 1250n,
      currency: "EUR",
      capture: true,
      card: { number: "4000056655665556", expMonth: 12, expYear: 2031, cvc: "123", holderName: "Ada Lovelace" },
    });
    expect(payment).toMatchObject({
      paymentId: "pay_inproc_order_1",
      status: PaymentStatus.SUCCEEDED,
      amount: 1250n,
      amountReceived: 1250n,
      amountCapturable: 0n,
      paymentMethodData: { card: { last4: "5556", brand: "visa", expMonth: "12", expYear: "2031" } },
    });
  });

  it("confirms a payment created earlier with the card sent to confirm", async () => {
    const created = await payments.createPayment({ amount: 990n, currency: "USD", profileId: suite.merchant.profileId });
    expect(created.status).toBe(PaymentStatus.REQUIRES_PAYMENT_METHOD);
    expect(processor.calls).toEqual([]);

    const confirmed = await payments.confirmPayment({ paymentId: created.paymentId, paymentMethodData: { card } });

    expect(processor.callsTo("authorize")).toMatchObject([
      { idempotencyKey: `${suite.merchant.merchantId}:${created.paymentId}:authorize`, amount: 990n, currency: "USD", capture: true },
    ]);
    expect(confirmed).toMatchObject({ status: PaymentStatus.SUCCEEDED, amountReceived: 990n });
  });

  it("answers failed with the processor's error code and message when it declines, and keeps them", async () => {
    processor.script("authorize", { status: "declined", errorCode: "do_not_honor", errorMessage: "The issuer declined the card." });

    const payment = await confirmedPayment();

    const declined = { status: PaymentStatus.FAILED, errorCode: "do_not_honor", errorMessage: "The issuer declined the card." };
    expect(payment).toMatchObject({ ...declined, amountCapturable: 0n });
    expect(payment.amountReceived).toBeUndefined();
    expect(await payments.retrievePayment({ paymentId: payment.paymentId })).toMatchObject(declined);
  });

  it("answers requires_action with a 3DS redirect when the processor asks for authentication", async () => {
    processor.script("authorize", { status: "requires_authentication" });

    const payment = await confirmedPayment();

    expect(payment.status).toBe(PaymentStatus.REQUIRES_ACTION);
    expect(payment.nextAction?.type).toBe(NextActionType.REDIRECT_TO_URL);
    expect(payment.nextAction?.redirectToUrl).toMatch(/^https:\/\/pay\.example\.test\/3ds\/[0-9A-Za-z]{40}$/);
  });

  it("refuses a taken payment_id (HE_01) before asking the processor, whose key for it is the first payment's", async () => {
    processor.script("authorize", { status: "captured", reference: "auth_first" });
    const first = await confirmedPayment({ paymentId: "pay_inproc_twice" });

    const message = await expectRpcError(confirmedPayment({ paymentId: "pay_inproc_twice" }), Code.AlreadyExists, "HE_01");

    expect(message).toBe("A payment with payment_id pay_inproc_twice already exists");
    expect(processor.calls.map((call) => call.method)).toEqual(["authorize"]);
    expect(await payments.retrievePayment({ paymentId: "pay_inproc_twice" })).toEqual(first);
  });
});

describe("steps after the authorization go to the processor the payment recorded", () => {
  it("captures part of a manual authorization with the authorization's reference", async () => {
    processor.script("authorize", { status: "authorized", reference: "auth_capture_me" });
    const authorized = await confirmedPayment({ manual: true });
    expect(authorized).toMatchObject({ status: PaymentStatus.REQUIRES_CAPTURE, amountCapturable: 1250n });
    expect(processor.callsTo("authorize")[0]?.capture).toBe(false);

    const captured = await payments.capturePayment({ paymentId: authorized.paymentId, amountToCapture: 700n });

    expect(processor.callsTo("capture")).toEqual([
      {
        idempotencyKey: `${suite.merchant.merchantId}:${authorized.paymentId}:capture`,
        reference: "auth_capture_me",
        amount: 700n,
        currency: "EUR",
      },
    ]);
    expect(captured).toMatchObject({ status: PaymentStatus.SUCCEEDED, amountReceived: 700n, amountCapturable: 0n });
  });

  it("answers failed with the processor's error when it declines the capture", async () => {
    const authorized = await confirmedPayment({ manual: true });
    processor.script("capture", { status: "declined", errorCode: "authorization_expired", errorMessage: "The authorization has expired." });

    const captured = await payments.capturePayment({ paymentId: authorized.paymentId });

    expect(processor.callsTo("capture")).toMatchObject([{ amount: 1250n }]);
    expect(captured).toMatchObject({
      status: PaymentStatus.FAILED,
      errorCode: "authorization_expired",
      errorMessage: "The authorization has expired.",
      amountCapturable: 0n,
    });
  });

  it("voids the authorization when a payment awaiting capture is cancelled", async () => {
    processor.script("authorize", { status: "authorized", reference: "auth_void_me" });
    const authorized = await confirmedPayment({ manual: true });

    const cancelled = await payments.cancelPayment({ paymentId: authorized.paymentId, cancellationReason: "duplicate" });

    expect(processor.callsTo("void")).toEqual([
      { idempotencyKey: `${suite.merchant.merchantId}:${authorized.paymentId}:void`, reference: "auth_void_me" },
    ]);
    expect(cancelled).toMatchObject({ status: PaymentStatus.CANCELLED, cancellationReason: "duplicate", amountCapturable: 0n });
  });

  it("asks the processor nothing when a payment it holds no money for is cancelled", async () => {
    processor.script("authorize", { status: "requires_authentication" });
    const waiting = await confirmedPayment();

    const cancelled = await payments.cancelPayment({ paymentId: waiting.paymentId });

    expect(processor.calls.map((call) => call.method)).toEqual(["authorize"]);
    expect(cancelled).toMatchObject({ status: PaymentStatus.CANCELLED, cancellationReason: "requested_by_customer" });
    expect(cancelled.nextAction).toBeUndefined();
  });
});

describe("a processor that fails", () => {
  it("gives HE_00 on create and leaves no payment behind", async () => {
    processor.script("authorize", new Error("connect ETIMEDOUT 203.0.113.7:443"));

    const message = await expectRpcError(confirmedPayment({ paymentId: "pay_inproc_timeout" }), Code.Internal, "HE_00");

    expect(message).not.toContain("ETIMEDOUT");
    expect(processor.calls.map((call) => call.method)).toEqual(["authorize"]);
    await expectRpcError(payments.retrievePayment({ paymentId: "pay_inproc_timeout" }), Code.NotFound, "HE_02");
    expect((await payments.listPayments({})).totalCount).toBe(0n);
  });

  it("gives HE_00 on confirm and leaves the payment as it was, to be confirmed again", async () => {
    const created = await payments.createPayment({ amount: 400n, currency: "GBP", profileId: suite.merchant.profileId });
    processor.script("authorize", new Error("socket hang up"));

    await expectRpcError(payments.confirmPayment({ paymentId: created.paymentId, paymentMethodData: { card } }), Code.Internal, "HE_00");

    const unchanged = await payments.retrievePayment({ paymentId: created.paymentId });
    expect(unchanged).toMatchObject({ status: PaymentStatus.REQUIRES_PAYMENT_METHOD, modifiedAt: created.modifiedAt });
    expect(unchanged.paymentMethodData).toBeUndefined();
    const retried = await payments.confirmPayment({ paymentId: created.paymentId, paymentMethodData: { card } });
    expect(retried.status).toBe(PaymentStatus.SUCCEEDED);
    // The retry carries the same key, so a processor that did authorize the first time answers with that.
    const [first, second] = processor.callsTo("authorize");
    expect(second?.idempotencyKey).toBe(first?.idempotencyKey);
  });

  it("gives HE_00 on capture and leaves the authorization to be captured again", async () => {
    const authorized = await confirmedPayment({ manual: true });
    processor.script("capture", new Error("502 Bad Gateway"));

    await expectRpcError(payments.capturePayment({ paymentId: authorized.paymentId }), Code.Internal, "HE_00");

    expect(await payments.retrievePayment({ paymentId: authorized.paymentId })).toMatchObject({
      status: PaymentStatus.REQUIRES_CAPTURE,
      amountCapturable: 1250n,
    });
    expect(await payments.capturePayment({ paymentId: authorized.paymentId })).toMatchObject({ status: PaymentStatus.SUCCEEDED });
    expect(processor.callsTo("capture")).toHaveLength(2);
  });
});

describe("what the processor is never asked", () => {
  it("answers IR_16 to a production caller, no processor being configured for production", async () => {
    const live = await suite.services.newMerchant({ livemode: true });

    const message = await expectRpcError(
      suite.services.client(PaymentService, live.caller).createPayment({
        amount: 1250n,
        currency: "EUR",
        profileId: live.profileId,
        confirm: true,
        paymentMethodData: { card },
      }),
      Code.FailedPrecondition,
      "IR_16",
    );

    expect(message).toBe("No payment processor is configured for production; use a sandbox key or configure a processor");
    expect(processor.calls).toEqual([]);
  });

  it("answers IR_14 to a capture of a payment that is not awaiting capture, naming both statuses", async () => {
    const succeeded = await confirmedPayment();

    const message = await expectRpcError(payments.capturePayment({ paymentId: succeeded.paymentId }), Code.FailedPrecondition, "IR_14");

    expect(message).toBe("This payment cannot be captured because its status is succeeded; expected requires_capture");
    expect(processor.calls.map((call) => call.method)).toEqual(["authorize"]);
  });

  it("answers IR_16 to a cancel or a second confirm of a succeeded payment, naming the statuses", async () => {
    const succeeded = await confirmedPayment();

    const cancel = await expectRpcError(payments.cancelPayment({ paymentId: succeeded.paymentId }), Code.FailedPrecondition, "IR_16");
    const confirm = await expectRpcError(
      payments.confirmPayment({ paymentId: succeeded.paymentId, paymentMethodData: { card } }),
      Code.FailedPrecondition,
      "IR_16",
    );

    expect(cancel).toBe(
      "This payment cannot be cancelled because its status is succeeded; " +
        "expected requires_payment_method or requires_confirmation or requires_action or requires_capture",
    );
    expect(confirm).toBe(
      "This payment cannot be confirmed because its status is succeeded; expected requires_payment_method or requires_confirmation",
    );
    expect(processor.calls.map((call) => call.method)).toEqual(["authorize"]);
  });
});

describe("while the processor answers", () => {
  it("no transaction is open: other calls go on, and a change to the same payment waits for the claim, then sees the outcome", async () => {
    const created = await payments.createPayment({ amount: 500n, currency: "USD", profileId: suite.merchant.profileId });
    let answer!: (result: AuthorizeResult) => void;
    processor.script("authorize", new Promise<AuthorizeResult>((resolve) => (answer = resolve)));
    const confirming = payments.confirmPayment(
      { paymentId: created.paymentId, paymentMethodData: { card } },
      { headers: { "x-idempotency-key": `held-${created.paymentId}` } },
    );
    await vi.waitFor(() => expect(processor.callsTo("authorize")).toHaveLength(1));

    // On the embedded database every connection shares one session, so a transaction held across
    // the call would make these wait for the processor; on PostgreSQL it would show in pg_stat_activity.
    const other = await suite.services.newMerchant();
    expect((await suite.services.client(PaymentService, other.caller).listPayments({})).totalCount).toBe(0n);
    expect((await payments.retrievePayment({ paymentId: created.paymentId })).status).toBe(PaymentStatus.REQUIRES_PAYMENT_METHOD);
    const [open] = (await suite.services.deps.dataSource.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
    )) as [{ n: number }];
    expect(open.n).toBe(0);
    const updating = payments.updatePayment({ paymentId: created.paymentId, description: "sent while the processor answers" });

    answer({ status: "captured", reference: "ref_held" });
    expect((await confirming).status).toBe(PaymentStatus.SUCCEEDED);
    expect(await expectRpcError(updating, Code.FailedPrecondition, "IR_16")).toContain("because its status is succeeded");
  });
});
