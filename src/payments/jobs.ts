import type { App } from "../app.js";
import type { JobHandler } from "../jobs/runner.js";
import { paymentJobs } from "./authorization.js";
import { cancelAuthorized, captureAuthorized } from "./service.js";
import { lockPayment, writePaymentChange } from "./store.js";

/**
 * Time-based payment moves, run by the job runner: a scheduled capture at capture_on, and the end of
 * a manual-capture authorization after 7 days. A payment that moved on in the meantime is left alone.
 */
export function paymentJobHandlers(app: App): Map<string, JobHandler> {
  return new Map<string, JobHandler>([
    [
      paymentJobs.captureScheduled,
      async (em, job) => {
        const row = await lockPayment(em, job, job.objectId);
        if (row.status !== "requires_capture") return;
        const jobs = await captureAuthorized(app, row, row.amountCapturable);
        await writePaymentChange(em, app, row, "requires_capture", jobs);
      },
    ],
    [
      paymentJobs.expireAuthorization,
      async (em, job) => {
        const row = await lockPayment(em, job, job.objectId);
        if (row.status !== "requires_capture") return;
        await cancelAuthorized(app, row, "expired");
        await writePaymentChange(em, app, row, "requires_capture");
      },
    ],
  ]);
}
