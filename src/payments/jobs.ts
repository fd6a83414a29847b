import { jobKinds, type JobKind } from "../jobs/kinds.js";
import type { JobHandler } from "../jobs/runner.js";
import { paymentStates } from "./states.js";
import { lockPayment, writePaymentChange } from "./store.js";
import { cancel, capture, type PaymentMoveDependencies } from "./transitions.js";

/**
 * Time-based payment moves, run by the job runner: a scheduled capture at capture_on, and the end of
 * a manual-capture authorization after 7 days. A payment that moved on in the meantime is left alone.
 */
export function paymentJobHandlers(deps: PaymentMoveDependencies): Map<JobKind, JobHandler> {
  return new Map<JobKind, JobHandler>([
    [
      jobKinds.capturePayment,
      async (em, job) => {
        const row = await lockPayment(em, job, job.objectId);
        if (!paymentStates.allows("capture", row.status)) return;
        const jobs = await capture(deps, row, row.amountCapturable);
        await writePaymentChange(em, deps.clock, row, "requires_capture", jobs);
      },
    ],
    [
      jobKinds.expireAuthorization,
      async (em, job) => {
        const row = await lockPayment(em, job, job.objectId);
        if (!paymentStates.allows("expire", row.status)) return;
        await cancel(deps, row, "expire", "expired");
        await writePaymentChange(em, deps.clock, row, "requires_capture");
      },
    ],
  ]);
}
