import type { Clock } from "../clock.js";
import { jobKinds, type JobKind } from "../jobs/kinds.js";
import type { JobHandler } from "../jobs/runner.js";
import { paymentStates } from "../payments/states.js";
import { lockPayment } from "../payments/store.js";
import { DisputeRow } from "./dispute.entity.js";
import { openDispute } from "./open.js";
import { disputeStates } from "./states.js";
import { lockDisputeWithPayment, writeDisputeChange } from "./store.js";

/**
 * Dispute jobs: the sandbox network reporting the dispute of a payment made with the dispute test
 * card, and the expiry of an opened dispute that got no evidence in time (it counts as lost).
 */
export function disputeJobHandlers(deps: { readonly clock: Clock }): Map<JobKind, JobHandler> {
  return new Map<JobKind, JobHandler>([
    [
      jobKinds.openReportedDispute,
      async (em, job) => {
        const payment = await lockPayment(em, job, job.objectId);
        const disputed = await em.existsBy(DisputeRow, { merchantId: job.merchantId, livemode: job.livemode, paymentId: job.objectId });
        if (paymentStates.allows("dispute", payment.status) && !disputed) await openDispute(em, deps.clock, payment, "fraudulent");
      },
    ],
    [
      jobKinds.expireDispute,
      async (em, job) => {
        // Payment first, as every dispute change: the dispute's new status changes the payment's row.
        const row = await lockDisputeWithPayment(em, job, job.objectId);
        if (!disputeStates.allows("expire", row.status)) return;
        disputeStates.move(row, "expire", "expired");
        row.updated = deps.clock.now();
        await writeDisputeChange(em, deps.clock, row, "opened");
      },
    ],
  ]);
}
