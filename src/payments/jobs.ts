import type { DataSource } from "typeorm";
import { claimObject, finishClaimed } from "../db/claims.js";
import { writeClaimedChange } from "../db/resource.js";
import { jobKinds, type JobKind } from "../jobs/kinds.js";
import type { JobRow } from "../jobs/job.entity.js";
import type { LeasedJobHandler, NewJob } from "../jobs/runner.js";
import type { PaymentRow } from "./payment.entity.js";
import { paymentStates, type PaymentOperation } from "./states.js";
import { paymentResource } from "./store.js";
import { cancel, capture, type PaymentMoveDependencies } from "./transitions.js";

/** What the payment jobs need: the database besides what the moves need. */
export interface PaymentJobDependencies extends PaymentMoveDependencies {
  readonly dataSource: DataSource;
}

/** How long a payment job is leased: as long as the claim it takes on the payment. */
const leaseMs = 60_000;

/**
 * Time-based payment moves, run by the job runner: a scheduled capture at capture_on, and the end of
 * a manual-capture authorization after 7 days. Each claims the payment and calls the processor with
 * no transaction open, as the API does; a payment that moved on in the meantime is left alone.
 */
export function paymentJobHandlers(deps: PaymentJobDependencies): Map<JobKind, LeasedJobHandler> {
  /**
   * Claims the job's payment if `operation` may still run on it, makes the move and writes its
   * outcome, which ends the job with the payment's other pending jobs when the move is final.
   */
  async function moveIfStillDue(
    job: JobRow,
    operation: PaymentOperation,
    move: (row: PaymentRow) => Promise<NewJob[]>,
  ): Promise<"ended" | undefined> {
    const claim = await claimObject(deps.dataSource, deps.clock, paymentResource, job, job.objectId, (row) =>
      paymentStates.allows(operation, row.status),
    );
    if (claim === undefined) return undefined;
    const previous = claim.row.status;
    return finishClaimed(deps.dataSource, paymentResource, claim, async () => {
      const jobs = await move(claim.row);
      return writeClaimedChange(deps.dataSource.manager, deps.clock, paymentResource, claim, previous, jobs);
    });
  }

  return new Map<JobKind, LeasedJobHandler>([
    [jobKinds.capturePayment, { leaseMs, run: (job) => moveIfStillDue(job, "capture", (row) => capture(deps, row, row.amountCapturable)) }],
    [
      jobKinds.expireAuthorization,
      { leaseMs, run: (job) => moveIfStillDue(job, "expire", (row) => cancel(deps, row, "expire", "expired")) },
    ],
  ]);
}
