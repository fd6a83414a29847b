import type { Clock } from "../clock.js";
import { jobKinds, type JobKind } from "../jobs/kinds.js";
import type { JobHandler } from "../jobs/runner.js";
import { PaymentRow } from "../payments/payment.entity.js";
import type { ProcessorRegistry } from "../processors/registry.js";
import { refundStates } from "./states.js";
import { lockRefund, writeRefundChange } from "./store.js";

/** What refund processing needs: time, and the processors (a refund goes to its payment's). */
export interface RefundJobDependencies {
  readonly clock: Clock;
  readonly processors: ProcessorRegistry;
}

/**
 * Sends a pending refund to the processor of its payment and records the outcome: succeeded, failed
 * (with the processor's error) or manual_review. A refund cancelled meanwhile is left alone.
 */
export function refundJobHandlers(deps: RefundJobDependencies): Map<JobKind, JobHandler> {
  return new Map<JobKind, JobHandler>([
    [
      jobKinds.processRefund,
      async (em, job) => {
        const row = await lockRefund(em, job, job.objectId);
        if (!refundStates.allows("process", row.status)) return;
        const payment = await em.findOneByOrFail(PaymentRow, { merchantId: row.merchantId, livemode: row.livemode, paymentId: row.paymentId });
        const result = await deps.processors.ofPayment(payment).refund({
          idempotencyKey: `${row.merchantId}:${row.refundId}:refund`,
          reference: payment.processorReference!,
          amount: row.amount,
          currency: row.currency,
        });
        row.processorReference = result.reference;
        refundStates.move(row, "process", result.status === "declined" ? "failed" : result.status);
        if (result.status === "declined") {
          row.errorCode = result.errorCode;
          row.errorMessage = result.errorMessage;
        }
        row.updated = deps.clock.now();
        await writeRefundChange(em, deps.clock, row, "pending");
      },
    ],
  ]);
}
