import { jobKinds, type JobKind } from "../jobs/kinds.js";
import type { JobRow } from "../jobs/job.entity.js";
import type { LeasedJobHandler } from "../jobs/runner.js";
import { jobLeaseMs as leaseMs } from "../leases.js";
import { operateOnPayment, type PaymentOperation, type PaymentOperationDependencies } from "./operation.js";
import { expireOperation } from "./operations/cancel.js";
import { scheduledCaptureOperation } from "./operations/capture.js";

/** What the payment jobs need: what the operations need. */
export type PaymentJobDependencies = PaymentOperationDependencies;

/**
 * Time-based payment moves, run by the job runner: a scheduled capture at capture_on, and the end of
 * a manual-capture authorization after 7 days. Each runs its operation as the API runs its own
 * (operation.ts); a payment that moved on in the meantime is left alone.
 */
export function paymentJobHandlers(deps: PaymentJobDependencies): Map<JobKind, LeasedJobHandler> {
  /** Runs the job's operation; "ended" when its outcome ended the payment's pending jobs, this one with them. */
  async function run(job: JobRow, operation: PaymentOperation): Promise<"ended" | undefined> {
    const operated = await operateOnPayment(deps, job, job.objectId, operation, undefined);
    return operated?.ended === true ? "ended" : undefined;
  }

  return new Map<JobKind, LeasedJobHandler>([
    [jobKinds.capturePayment, { leaseMs, run: (job) => run(job, scheduledCaptureOperation()) }],
    [jobKinds.expireAuthorization, { leaseMs, run: (job) => run(job, expireOperation(deps)) }],
  ]);
}
