import { Code, type Client } from "@connectrpc/connect";
import { beforeEach, describe, expect, it } from "vitest";
import { CaptureMethod, PaymentService } from "../../gen/paymentservice/v1/payment_pb.js";
import { RefundService, RefundStatus, RefundType } from "../../gen/paymentservice/v1/refund_pb.js";
import { expectRpcError } from "../support/errors.js";
import { inProcessSuite } from "../support/in-process.js";
import { ScriptedProcessor } from "../support/scripted-processor.js";

/*
 * Refunds through the router transport, on a real (embedded or PostgreSQL) database, with a
 * scripted processor. A refund is written pending with its job; the processor is asked only when
 * the job runs, which here is when a test calls runDue() (the runner never polls), so each test
 * sees exactly what was asked, of which processor, and what the client then reads back.
 */

const processor = new ScriptedProcessor("scripted");
const suite = inProcessSuite(processor);
let payments: Client<typeof PaymentService>;
let refunds: Client<typeof RefundService>;

beforeEach(() => {
  payments = suite.client(PaymentService);
  refunds = suite.client(RefundService);
});

const card = { cardNumber: "4242424242424242", cardExpMonth: "12", cardExpYear: "2031", cardCvc: "123" };

/** A payment of 1250 EUR the processor captured under `reference`; the processor's record of it is then forgotten. */
async function capturedPayment(reference = "auth_to_refund"): Promise<string> {
  processor.script("authorize", { status: "captured", reference });
  const payment = await payments.createPayment({
    amount: 1250n,
    currency: "EUR",
    profileId: suite.merchant.profileId,
    confirm: true,
    paymentMethodData: { card },
  });
  processor.reset();
  return payment.paymentId;
}

describe("an instant refund", () => {
  it("is sent, once committed, to the payment's processor with the payment's reference, and succeeds", async () => {
    const paymentId = await capturedPayment("auth_to_refund");

    const refund = await refunds.createRefund({ paymentId, amount: 500n });
    expect(refund).toMatchObject({ status: RefundStatus.PENDING, amount: 500n, currency: "EUR", refundType: RefundType.INSTANT });
    expect(processor.calls).toEqual([]);

    expect(await suite.services.jobs.runDue()).toBe(1);

    expect(processor.callsTo("refund")).toEqual([
      {
        idempotencyKey: `${suite.merchant.merchantId}:${refund.refundId}:refund`,
        reference: "auth_to_refund",
        amount: 500n,
        currency: "EUR",
      },
    ]);
    expect(await refunds.retrieveRefund({ refundId: refund.refundId })).toMatchObject({ status: RefundStatus.SUCCEEDED });
  });

  it("takes what is left when no amount is given, and then nothing is left (IR_13) nor sent", async () => {
    const paymentId = await capturedPayment();
    await refunds.createRefund({ paymentId, amount: 300n });

    const rest = await refunds.createRefund({ paymentId });
    const message = await expectRpcError(refunds.createRefund({ paymentId }), Code.FailedPrecondition, "IR_13");
    await suite.services.jobs.runDue();

    expect(rest.amount).toBe(950n);
    expect(message).toBe("Nothing is left to refund on this payment");
    // The runner sends the two refunds at once, so the processor may hear of them in either order.
    expect(processor.callsTo("refund").map((request) => request.amount)).toEqual(expect.arrayContaining([300n, 950n]));
    expect(processor.callsTo("refund")).toHaveLength(2);
  });

  it("answers manual_review when the processor holds it for review, and the amount stays counted", async () => {
    const paymentId = await capturedPayment();
    processor.script("refund", { status: "manual_review", reference: "review_1" });
    const refund = await refunds.createRefund({ paymentId, amount: 1000n });

    await suite.services.jobs.runDue();

    expect(await refunds.retrieveRefund({ refundId: refund.refundId })).toMatchObject({ status: RefundStatus.MANUAL_REVIEW });
    const message = await expectRpcError(refunds.createRefund({ paymentId, amount: 500n }), Code.FailedPrecondition, "IR_13");
    expect(message).toBe("The refund amount 500 exceeds what is left to refund on this payment (250)");
  });

  it("answers failed with the processor's error when it declines, and the amount can be refunded again", async () => {
    const paymentId = await capturedPayment();
    processor.script("refund", { status: "declined", errorCode: "refund_declined", errorMessage: "The issuer declined the refund." });
    const refund = await refunds.createRefund({ paymentId });

    await suite.services.jobs.runDue();

    expect(await refunds.retrieveRefund({ refundId: refund.refundId })).toMatchObject({
      status: RefundStatus.FAILED,
      errorCode: "refund_declined",
      errorMessage: "The issuer declined the refund.",
    });
    const again = await refunds.createRefund({ paymentId });
    await suite.services.jobs.runDue();
    expect(await refunds.retrieveRefund({ refundId: again.refundId })).toMatchObject({ amount: 1250n, status: RefundStatus.SUCCEEDED });
  });

  it("stays pending when the processor fails, and is retried with the same idempotency key", async () => {
    const paymentId = await capturedPayment();
    processor.script("refund", new Error("connect ECONNREFUSED"));
    const refund = await refunds.createRefund({ paymentId });

    await suite.services.jobs.runDue();
    expect(await refunds.retrieveRefund({ refundId: refund.refundId })).toMatchObject({ status: RefundStatus.PENDING });

    // The first retry waits 10 s (src/jobs/runner.ts).
    suite.services.clock.advance(10_000);
    await suite.services.jobs.runDue();

    expect(await refunds.retrieveRefund({ refundId: refund.refundId })).toMatchObject({ status: RefundStatus.SUCCEEDED });
    const [first, retry] = processor.callsTo("refund");
    expect(retry).toEqual(first);
  });
});

describe("a scheduled refund", () => {
  it("is sent at the settlement run, unless cancelled before it", async () => {
    const paymentId = await capturedPayment();
    const kept = await refunds.createRefund({ paymentId, amount: 200n, refundType: RefundType.SCHEDULED });
    const cancelled = await refunds.createRefund({ paymentId, amount: 300n, refundType: RefundType.SCHEDULED });

    await suite.services.jobs.runDue();
    expect(processor.calls).toEqual([]);
    expect(await refunds.cancelRefund({ refundId: cancelled.refundId })).toMatchObject({ status: RefundStatus.CANCELLED });

    suite.services.clock.advance(suite.services.deps.scheduledRefundDelayMs);
    await suite.services.jobs.runDue();

    expect(processor.callsTo("refund")).toMatchObject([
      { idempotencyKey: `${suite.merchant.merchantId}:${kept.refundId}:refund`, amount: 200n },
    ]);
    expect(await refunds.retrieveRefund({ refundId: kept.refundId })).toMatchObject({ status: RefundStatus.SUCCEEDED });
    expect(await refunds.retrieveRefund({ refundId: cancelled.refundId })).toMatchObject({ status: RefundStatus.CANCELLED });
  });
});

describe("what is refused before anything is written", () => {
  it("answers IR_14 to a refund of a payment whose money was not taken yet", async () => {
    const authorized = await payments.createPayment({
      amount: 1250n,
      currency: "EUR",
      profileId: suite.merchant.profileId,
      confirm: true,
      captureMethod: CaptureMethod.MANUAL,
      paymentMethodData: { card },
    });

    const message = await expectRpcError(refunds.createRefund({ paymentId: authorized.paymentId }), Code.FailedPrecondition, "IR_14");
    await suite.services.jobs.runDue();

    expect(message).toBe("This payment cannot be refunded because its status is requires_capture; expected succeeded");
    expect((await refunds.listRefunds({ paymentId: authorized.paymentId })).totalCount).toBe(0n);
    expect(processor.calls.map((call) => call.method)).toEqual(["authorize"]);
  });
});
