import type { EntityManager } from "typeorm";
import type { Clock } from "../clock.js";
import { EventRow } from "../events/event.entity.js";
import { JobRow } from "../jobs/job.entity.js";
import type { NewJob } from "../jobs/runner.js";
import { deliveriesSql, eventsReturning } from "../webhooks/schedule.js";
import type { Statement } from "../db/statement.js";

/**
 * Adds what must commit with a change — the event of the status it entered, its webhook delivery and
 * the jobs it needs — to the change's statement, written only if the change (the CTE named `after`)
 * wrote its row.
 */
export function addFollowUps(
  statement: Statement,
  em: EntityManager,
  clock: Clock,
  followUps: { event?: EventRow; jobs: readonly NewJob[] },
  after: string,
): void {
  if (followUps.event !== undefined) {
    statement.insert("event", em.connection.getMetadata(EventRow), followUps.event, after, eventsReturning);
    statement.raw("delivery", deliveriesSql("event"));
  }
  for (const [i, job] of followUps.jobs.entries()) {
    statement.insert(`job${i}`, em.connection.getMetadata(JobRow), jobRowOf(job, clock), after);
  }
}

/** The row of a job to schedule, not yet attempted. */
export function jobRowOf(job: NewJob, clock: Clock): JobRow {
  return Object.assign(new JobRow(), { ...job, status: "pending", attempts: 0, lastError: null, created: clock.now() });
}

/**
 * Adds the deletion of an object's pending jobs of `kindPrefix` (a final status makes them pointless).
 * A job a runner has claimed is skipped, not waited for: the runner holds the job's lock and then
 * waits for the object's lock, which the caller holds, so waiting would deadlock (a cancel racing
 * the processing of a due scheduled refund). That runner finds the object final, leaves it alone and
 * deletes its job itself. A job of the caller's own transaction (a handler ending it) is not skipped.
 */
export function addEndOfJobs(
  statement: Statement,
  object: { merchantId: string; livemode: boolean; objectId: string },
  kindPrefix: string,
): void {
  statement.raw(
    "ended_jobs",
    `DELETE FROM jobs WHERE job_id IN (SELECT job_id FROM jobs WHERE merchant_id = ${statement.param(object.merchantId, "varchar")} ` +
      `AND livemode = ${statement.param(object.livemode, "boolean")} AND object_id = ${statement.param(object.objectId, "varchar")} ` +
      `AND starts_with(kind, ${statement.param(kindPrefix, "text")}) FOR UPDATE SKIP LOCKED)`,
  );
}
