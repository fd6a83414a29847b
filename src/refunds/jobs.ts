import type { App } from "../app.js";
import type { JobHandler } from "../jobs/runner.js";
import { PaymentRow } from "../payments/payment.entity.js";
import { processorFor } from "../processors/registry.js";
import { lockRefund, processRefundJob, writeRefundChange } from "./store.js";

/**
 * Sends a pending refund to the processor of its payment and records the outcome: succeeded, failed
 * (with the processor's error) or manual_review. A refund cancelled meanwhile is left alone.
 */
export function refundJobHandlers(app: App): Map<string, JobHandler> {
  return new Map<string, JobHandler>([
    [
      processRefundJob,
      async (em, job) => {
        const row = await lockRefund(em, job, job.objectId);
        if (row.status !== "pending") return;
        const payment = await em.findOneByOrFail(PaymentRow, { merchantId: row.merchantId, livemode: row.livemode, paymentId: row.paymentId });
        const result = await processorFor(row.livemode).refund({
          idempotencyKey: `${row.merchantId}:${row.refundId}:refund`,
          reference: payment.processorReference!,
          amount: row.amount,
          currency: row.currency,
        });
        row.processorReference = result.reference;
        row.status = result.status === "declined" ? "failed" : result.status;
        if (result.status === "declined") {
          row.errorCode = result.errorCode;
          row.errorMessage = result.errorMessage;
        }
        row.updated = app.clock.now();
        await writeRefundChange(em, app, row, "pending");
      },
    ],
  ]);
}
