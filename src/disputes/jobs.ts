import type { Clock } from "../clock.js";
import { jobKinds, type JobKind } from "../jobs/kinds.js";
import type { JobHandler } from "../jobs/runner.js";
import { runLocked } from "../objects/locked-operation.js";
import { lockPayment } from "../payments/store.js";
import { expireOperation } from "./operations/expire.js";
import { openReportedDispute } from "./operations/open.js";
import { disputeResource } from "./store.js";

/**
 * Dispute jobs: the sandbox network reporting the dispute of a payment made with the dispute test
 * card, and the expiry of an opened dispute that got no evidence in time (it counts as lost).
 */
export function disputeJobHandlers(deps: { readonly clock: Clock }): Map<JobKind, JobHandler> {
  return new Map<JobKind, JobHandler>([
    [jobKinds.openReportedDispute, async (em, job) => openReportedDispute(em, deps.clock, await lockPayment(em, job, job.objectId))],
    [
      jobKinds.expireDispute,
      async (em, job) => void (await runLocked(em, deps.clock, disputeResource, expireOperation(deps.clock, job, job.objectId))),
    ],
  ]);
}
