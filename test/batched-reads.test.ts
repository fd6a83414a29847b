import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { PaymentService } from "../gen/paymentservice/v1/payment_pb.js";
import { RefundService } from "../gen/paymentservice/v1/refund_pb.js";
import { visaCard as card } from "./support/cards.js";
import { rest, rpcClient, type RestResponse, type RpcProtocol } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { expectRestError, expectRpcError } from "./support/errors.js";
import { newMerchant, type TestMerchant } from "./support/merchant.js";
import { createPayment } from "./support/payments.js";
import { runningService } from "./support/running.js";
import { noPolling } from "./support/service.js";

/*
 * Reads of one object by its id made at the same moment share one statement (docs/architecture.md,
 * "Batches"): retrieves, a new refund's read of its payment, the refund job's read of its payment.
 * Whatever else the statement carries, each call must get its own object, or its own 404: these
 * tests send mixed bursts at one instance, on both databases.
 */

const clock = new TestClock();
const service = runningService(noPolling, clock);

const get = (merchant: TestMerchant, path: string): Promise<RestResponse> => rest(service.url, "GET", path, { apiKey: merchant.apiKey });
const post = (merchant: TestMerchant, path: string, body: unknown): Promise<RestResponse> =>
  rest(service.url, "POST", path, { apiKey: merchant.apiKey, body });

/** Paid payments of `merchant`, each of its own amount (1000, 1001, …), so that a mixed-up answer shows. */
function paidPayments(merchant: TestMerchant, count: number): Promise<{ payment_id: string; amount: number }[]> {
  return Promise.all(
    Array.from({ length: count }, (_, i) =>
      createPayment(service.url, merchant, { amount: 1000 + i, confirm: true, payment_method: "card", payment_method_data: { card } }),
    ),
  );
}

describe("reads made in one burst", () => {
  it("retrieves each get their own object, or their own 404 (missing, or another merchant's)", async () => {
    const [owner, other] = await Promise.all([newMerchant(service.url), newMerchant(service.url)]);
    const paid = await paidPayments(owner, 10);
    const refund = await post(owner, "/refunds", { payment_id: paid[0]!.payment_id, amount: 100 });
    expect(refund.status, JSON.stringify(refund.body)).toBe(200);

    type Expected = { status: 200; body: Record<string, unknown> } | { status: 404; id: string };
    const calls: { merchant: TestMerchant; path: string; expected: Expected }[] = [
      // A payment polled by many clients at once is read as often as it is asked for, in one batch or several.
      ...[...paid, ...paid.slice(0, 3), ...Array.from({ length: 12 }, () => paid[1]!)].map((p) => ({
        merchant: owner,
        path: `/payments/${p.payment_id}`,
        expected: { status: 200, body: { payment_id: p.payment_id, amount: p.amount, status: "succeeded" } } as Expected,
      })),
      ...paid.slice(0, 3).map((p) => ({
        merchant: other,
        path: `/payments/${p.payment_id}`,
        expected: { status: 404, id: p.payment_id } as Expected,
      })),
      ...[0, 1].map((i) => ({
        merchant: owner,
        path: `/payments/pay_missing${i}`,
        expected: { status: 404, id: `pay_missing${i}` } as Expected,
      })),
      {
        merchant: owner,
        path: `/refunds/${refund.body.refund_id}`,
        expected: { status: 200, body: { refund_id: refund.body.refund_id, payment_id: paid[0]!.payment_id, amount: 100 } },
      },
    ];

    const responses = await Promise.all(calls.map((call) => get(call.merchant, call.path)));

    for (const [i, res] of responses.entries()) {
      const { expected } = calls[i]!;
      if (expected.status === 404) expect(expectRestError(res, 404, "HE_02")).toContain(expected.id);
      else expect(res.body, JSON.stringify(res.body)).toMatchObject(expected.body);
    }
  });

  it("refunds of all that is left each take their own payment's amount, and their jobs, run together, each settle their own", async () => {
    const [owner, other] = await Promise.all([newMerchant(service.url), newMerchant(service.url)]);
    const paid = await paidPayments(owner, 12);

    const [refunds, strangers, missing] = await Promise.all([
      Promise.all(paid.map((p) => post(owner, "/refunds", { payment_id: p.payment_id }))),
      Promise.all(paid.slice(0, 2).map((p) => post(other, "/refunds", { payment_id: p.payment_id }))),
      post(owner, "/refunds", { payment_id: "pay_missing" }),
    ]);

    for (const [i, res] of refunds.entries()) {
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toMatchObject({ payment_id: paid[i]!.payment_id, amount: paid[i]!.amount, status: "pending" });
    }
    for (const [i, res] of strangers.entries()) expect(expectRestError(res, 404, "HE_02")).toContain(paid[i]!.payment_id);
    expect(expectRestError(missing, 404, "HE_02")).toContain("pay_missing");

    await service.jobs.runDue();
    const settled = await Promise.all(refunds.map((res) => get(owner, `/refunds/${res.body.refund_id}`)));
    for (const [i, res] of settled.entries()) {
      expect(res.body).toMatchObject({ refund_id: refunds[i]!.body.refund_id, amount: paid[i]!.amount, status: "succeeded" });
    }
  });

  for (const protocol of ["connect", "grpc", "grpc-web"] as RpcProtocol[]) {
    it(`${protocol}: retrieves in one burst each get their own object, or their own refusal (missing, another merchant's, empty, NUL, huge)`, async () => {
      const [owner, other] = await Promise.all([newMerchant(service.url), newMerchant(service.url)]);
      const paid = await paidPayments(owner, 6);
      const refund = await post(owner, "/refunds", { payment_id: paid[0]!.payment_id, amount: 100 });
      expect(refund.status, JSON.stringify(refund.body)).toBe(200);
      const payments = rpcClient(PaymentService, service.url, protocol, { apiKey: owner.apiKey });
      const strangers = rpcClient(PaymentService, service.url, protocol, { apiKey: other.apiKey });
      const refunds = rpcClient(RefundService, service.url, protocol, { apiKey: owner.apiKey });

      const checks: Promise<unknown>[] = [
        ...[...paid, ...Array.from({ length: 6 }, () => paid[1]!)].map(async (p) => {
          const got = await payments.retrievePayment({ paymentId: p.payment_id });
          expect({ paymentId: got.paymentId, amount: got.amount }).toEqual({ paymentId: p.payment_id, amount: BigInt(p.amount) });
        }),
        ...paid.slice(0, 2).map(async (p) => {
          expect(await expectRpcError(strangers.retrievePayment({ paymentId: p.payment_id }), Code.NotFound, "HE_02")).toContain(
            p.payment_id,
          );
        }),
        expectRpcError(payments.retrievePayment({ paymentId: "pay_missing" }), Code.NotFound, "HE_02"),
        expectRpcError(payments.retrievePayment({ paymentId: `pay_${"x".repeat(5000)}` }), Code.NotFound, "HE_02"),
        expectRpcError(payments.retrievePayment({ paymentId: "" }), Code.InvalidArgument, "IR_04"),
        expectRpcError(payments.retrievePayment({ paymentId: "pay_\u0000abc" }), Code.InvalidArgument, "IR_06"),
        (async () => {
          const got = await refunds.retrieveRefund({ refundId: refund.body.refund_id });
          expect({ refundId: got.refundId, paymentId: got.paymentId, amount: got.amount }).toEqual({
            refundId: refund.body.refund_id,
            paymentId: paid[0]!.payment_id,
            amount: 100n,
          });
        })(),
      ];
      await Promise.all(checks);
    });
  }
});
