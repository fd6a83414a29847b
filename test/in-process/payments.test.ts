import { Code, type Client } from "@connectrpc/connect";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { CaptureMethod, NextActionType, PaymentService, PaymentStatus } from "../../gen/paymentservice/v1/payment_pb.js";
import { expectRpcError } from "../support/errors.js";
import { inProcessSuite } from "../support/in-process.js";
import { lostAnswer, ScriptedProcessor } from "../support/scripted-processor.js";
import { settleLeftAttempts } from "../../src/payments/operation.js";
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

/** Matches the processor idempotency key of an attempt at `call` on the payment: its own for each attempt. */
function attemptKey(paymentId: string, call: string) {
  return expect.stringMatching(new RegExp(`^${suite.merchant.merchantId}:${paymentId}:${call}:[0-9A-Za-z]{12}$`));
}

/** Creates and confirms a payment of 1250 EUR with `card`, capturing at once unless `manual`, sending `headers`. */
function confirmedPayment(options: { manual?: boolean; paymentId?: string; headers?: Record<string, string> } = {}) {
  return payments.createPayment(
    {
      amount: 1250n,
      currency: "EUR",
      profileId: suite.merchant.profileId,
      paymentId: options.paymentId,
      confirm: true,
      captureMethod: options.manual === true ? CaptureMethod.MANUAL : undefined,
      paymentMethodData: { card },
    },
    { headers: options.headers },
  );
}

describe("create and confirm", () => {
  it("sends the amount, currency, card and the payment's idempotency key to the processor, and answers succeeded", async () => {
    const payment = await confirmedPayment({ paymentId: "pay_inproc_order_1" });

    expect(processor.calls.map((call) => call.method)).toEqual(["authorize"]);
    expect(processor.callsTo("authorize")[0]).toEqual({
      idempotencyKey: attemptKey("pay_inproc_order_1", "authorize"),
      amount: 1250n,
      currency: "EUR",
      capture: true,
      card: { number: "4000056655665556", expMonth: 12, expYear: 2031, cvc: "123", holderName: "Ada Lovelace" },
      offSession: false,
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
      { idempotencyKey: attemptKey(created.paymentId, "authorize"), amount: 990n, currency: "USD", capture: true },
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

  it("refuses a taken payment_id (HE_01) when recording the payment, before asking the processor", async () => {
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
        idempotencyKey: attemptKey(authorized.paymentId, "capture"),
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

    expect(processor.callsTo("void")).toEqual([{ idempotencyKey: attemptKey(authorized.paymentId, "void"), reference: "auth_void_me" }]);
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
  it("gives HE_00 on create, and recovery settles the recorded payment as the processor never received the call", async () => {
    processor.script("authorize", new Error("connect ETIMEDOUT 203.0.113.7:443"));

    const message = await expectRpcError(confirmedPayment({ paymentId: "pay_inproc_timeout" }), Code.Internal, "HE_00");

    expect(message).not.toContain("ETIMEDOUT");
    expect(await payments.retrievePayment({ paymentId: "pay_inproc_timeout" })).toMatchObject({ status: PaymentStatus.PROCESSING });
    expect(await settleLeftAttempts(suite.services.deps)).toBeGreaterThanOrEqual(1);
    const settled = await payments.retrievePayment({ paymentId: "pay_inproc_timeout" });
    expect(settled).toMatchObject({ status: PaymentStatus.REQUIRES_PAYMENT_METHOD, amountCapturable: 0n, errorCode: "processing_error" });
    expect(settled.amountReceived).toBeUndefined();
    // The key recovery settled as never received is refused from then on: a late call cannot authorize.
    const [timedOut] = processor.callsTo("authorize");
    expect(await processor.recall("authorize", timedOut!.idempotencyKey)).toBeUndefined();
  });

  it("settles a create whose answer was lost with the processor's own record: the money it took is on the payment", async () => {
    processor.script("authorize", lostAnswer({ status: "captured", reference: "auth_taken_then_lost" }));

    await expectRpcError(confirmedPayment({ paymentId: "pay_inproc_lost" }), Code.Internal, "HE_00");
    await settleLeftAttempts(suite.services.deps);

    expect(await payments.retrievePayment({ paymentId: "pay_inproc_lost" })).toMatchObject({
      status: PaymentStatus.SUCCEEDED,
      amountReceived: 1250n,
      paymentMethodData: { card: { last4: "5556" } },
    });
    expect(processor.callsTo("authorize")).toHaveLength(1);
  });

  it("finishes a create retried with its idempotency key after a lost answer: the same payment, one authorization", async () => {
    processor.script("authorize", lostAnswer({ status: "authorized", reference: "auth_retried" }));
    const retry = { manual: true, headers: { "idempotency-key": "create-lost-answer" } };

    await expectRpcError(confirmedPayment(retry), Code.Internal, "HE_00");
    const retried = await confirmedPayment(retry);

    expect(retried).toMatchObject({ status: PaymentStatus.REQUIRES_CAPTURE, amountCapturable: 1250n });
    expect((await payments.listPayments({})).totalCount).toBe(1n);
    const keys = processor.callsTo("authorize").map((call) => call.idempotencyKey);
    expect(keys).toHaveLength(2);
    expect(keys[1]).toBe(keys[0]);
    expect(await confirmedPayment(retry)).toEqual(retried);
  });

  it("answers a capture retried with its key after recovery settled it with the outcome, captured once", async () => {
    const authorized = await confirmedPayment({ manual: true });
    processor.script("capture", lostAnswer({ status: "succeeded" }));
    const headers = { "idempotency-key": "capture-settled-by-recovery" };

    await expectRpcError(payments.capturePayment({ paymentId: authorized.paymentId }, { headers }), Code.Internal, "HE_00");
    await settleLeftAttempts(suite.services.deps);
    const retried = await payments.capturePayment({ paymentId: authorized.paymentId }, { headers });

    expect(retried).toMatchObject({ status: PaymentStatus.SUCCEEDED, amountReceived: 1250n });
    expect(processor.callsTo("capture")).toHaveLength(1);
  });

  it("gives HE_00 on confirm and leaves the payment as it was, to be confirmed again under a new key", async () => {
    const created = await payments.createPayment({ amount: 400n, currency: "GBP", profileId: suite.merchant.profileId });
    processor.script("authorize", new Error("socket hang up"));

    await expectRpcError(payments.confirmPayment({ paymentId: created.paymentId, paymentMethodData: { card } }), Code.Internal, "HE_00");

    const unchanged = await payments.retrievePayment({ paymentId: created.paymentId });
    expect(unchanged).toMatchObject({ status: PaymentStatus.REQUIRES_PAYMENT_METHOD, modifiedAt: created.modifiedAt });
    expect(unchanged.paymentMethodData).toBeUndefined();
    const retried = await payments.confirmPayment({ paymentId: created.paymentId, paymentMethodData: { card } });
    expect(retried.status).toBe(PaymentStatus.SUCCEEDED);
    // The retry first asked what the failed call did: nothing, and its key is now refused, so the new
    // attempt's key cannot authorize twice.
    const [first, second] = processor.callsTo("authorize");
    expect(second?.idempotencyKey).not.toBe(first?.idempotencyKey);
    expect(await processor.recall("authorize", first!.idempotencyKey)).toBeUndefined();
  });

  it("records the payment in processing, with its attempt's key, before the processor is asked", async () => {
    let answer!: (result: { status: "captured" }) => void;
    processor.script("authorize", new Promise((resolve) => (answer = resolve)));

    const creating = confirmedPayment({ paymentId: "pay_inproc_recorded" });
    await vi.waitFor(() => expect(processor.callsTo("authorize")).toHaveLength(1));

    const [stored] = await suite.services.deps.dataSource.query(
      "SELECT status, attempt FROM payments WHERE merchant_id = $1 AND payment_id = 'pay_inproc_recorded'",
      [suite.merchant.merchantId],
    );
    expect(stored).toEqual({
      status: "processing",
      attempt: expect.objectContaining({ call: "authorize", key: processor.callsTo("authorize")[0]!.idempotencyKey }),
    });
    answer({ status: "captured" });
    expect(await creating).toMatchObject({ status: PaymentStatus.SUCCEEDED });
    const [after] = await suite.services.deps.dataSource.query(
      "SELECT attempt FROM payments WHERE merchant_id = $1 AND payment_id = 'pay_inproc_recorded'",
      [suite.merchant.merchantId],
    );
    expect(after).toEqual({ attempt: null });
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
    // Its answer may come before the confirm's: the outcome is written before either call is answered.
    const updating = expectRpcError(
      payments.updatePayment({ paymentId: created.paymentId, description: "sent while the processor answers" }),
      Code.FailedPrecondition,
      "IR_16",
    );

    answer({ status: "captured", reference: "ref_held" });
    expect((await confirming).status).toBe(PaymentStatus.SUCCEEDED);
    expect(await updating).toContain("because its status is succeeded");
  });
});
