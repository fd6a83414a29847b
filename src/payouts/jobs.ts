import { jobKinds, type JobKind } from "../jobs/kinds.js";
import type { LeasedJobHandler } from "../jobs/runner.js";
import { jobLeaseMs } from "../leases.js";
import { sendPayout, type PayoutSendingDependencies } from "./operations/send.js";

/** What the payout jobs need: what sending needs. */
export type PayoutJobDependencies = PayoutSendingDependencies;

/** How long a sending job is leased (src/leases.ts): an instance that dies mid-send leaves the job to be picked up again. */
const sendLeaseMs = jobLeaseMs;

/** The payout jobs: sending runs outside a transaction (leased), with its own recovery points (operations/send.ts). */
export function payoutJobHandlers(deps: PayoutJobDependencies): Map<JobKind, LeasedJobHandler> {
  return new Map<JobKind, LeasedJobHandler>([[jobKinds.sendPayout, { leaseMs: sendLeaseMs, run: (job) => sendPayout(deps, job) }]]);
}
