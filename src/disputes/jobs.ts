import type { App } from "../app.js";
import type { JobHandler } from "../jobs/runner.js";
import { lockPayment } from "../payments/store.js";
import { DisputeRow } from "./dispute.entity.js";
import { openDispute } from "./open.js";
import { disputeJobs, lockDispute, writeDisputeChange } from "./store.js";

/**
 * Dispute jobs: the sandbox network reporting the dispute of a payment made with the dispute test
 * card, and the expiry of an opened dispute that got no evidence in time (it counts as lost).
 */
export function disputeJobHandlers(app: App): Map<string, JobHandler> {
  return new Map<string, JobHandler>([
    [
      disputeJobs.openReported,
      async (em, job) => {
        const payment = await lockPayment(em, job, job.objectId);
        const disputed = await em.existsBy(DisputeRow, { merchantId: job.merchantId, livemode: job.livemode, paymentId: job.objectId });
        if (payment.status === "succeeded" && !disputed) await openDispute(em, app, payment, "fraudulent");
      },
    ],
    [
      disputeJobs.expire,
      async (em, job) => {
        const row = await lockDispute(em, job, job.objectId);
        if (row.status !== "opened") return;
        row.status = "expired";
        row.updated = app.clock.now();
        await writeDisputeChange(em, app, row, "opened");
      },
    ],
  ]);
}
