import { jobKinds, type JobKind } from "../jobs/kinds.js";
import type { LeasedJobHandler } from "../jobs/runner.js";
import { jobLeaseMs as leaseMs } from "../leases.js";
import { processRefund, type RefundProcessingDependencies } from "./operations/process.js";

/** What the refund jobs need: what processing needs. */
export type RefundJobDependencies = RefundProcessingDependencies;

/** The refund jobs: processing, run as operations/process.ts says. */
export function refundJobHandlers(deps: RefundJobDependencies): Map<JobKind, LeasedJobHandler> {
  return new Map<JobKind, LeasedJobHandler>([[jobKinds.processRefund, { leaseMs, run: (job) => processRefund(deps, job) }]]);
}
