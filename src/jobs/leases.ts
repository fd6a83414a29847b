import type { DataSource, EntityManager } from "typeorm";
import { holderGone, holderOf } from "../db/liveness.js";
import { rowFromDatabase } from "../db/lock.js";
import { preparedQuery } from "../db/prepared.js";
import { JobRow } from "./job.entity.js";

/*
 * A runner owns a job by leasing it: the claim moves the job's run_at to the end of its lease, and
 * that value is the claim token. Whatever the runner does to the job afterwards (delete it, put it
 * off after a failure) is conditioned on run_at still holding that token, so a runner whose lease
 * ran out and whose job another runner claimed changes nothing. No two claims of a job hand out the
 * same token: each claim comes later than the one before (the job is due again only once that lease
 * has ended, or at the retry time a failure set after that claim), and a kind's leases are equally
 * long. A job leased by an instance that is gone (db/liveness.ts) is due at once: the new lease ends
 * before the dead one would have, so its token differs too.
 */

/**
 * The oldest due pending jobs (and those leased by an instance that is gone; never a dead one),
 * locked without waiting for those another runner is claiming, leased each for its kind's lease (`$3` kinds, `$4` their leases in ms,
 * `$5` for any other kind) by this instance (`$6`), oldest first so they start in the order they fell due. The selection is a MATERIALIZED CTE rather than
 * `job_id IN (subquery)`: the planner may run such a subquery more than once in one statement, and
 * with SKIP LOCKED each run can pick other rows, past the LIMIT.
 */
const claimSql = `WITH due AS MATERIALIZED (
  SELECT job_id, run_at FROM jobs WHERE status = 'pending' AND (run_at <= $1::timestamptz OR ${holderGone("leased_by")})
   ORDER BY run_at LIMIT $2 FOR UPDATE SKIP LOCKED
), leased AS (
  UPDATE jobs SET run_at = $1::timestamptz + interval '1 millisecond' * coalesce(($4::integer[])[array_position($3::text[], jobs.kind::text)], $5::integer),
    leased_by = $6::integer
  FROM due WHERE jobs.job_id = due.job_id
  RETURNING jobs.*, due.run_at AS due_at
)
SELECT * FROM leased ORDER BY due_at, job_id`;

const endSql = `DELETE FROM jobs WHERE job_id = $1 AND run_at = $2`;

const retrySql = `UPDATE jobs SET attempts = $3, last_error = $4, run_at = $5, leased_by = NULL WHERE job_id = $1 AND run_at = $2`;

const buriedSql = `UPDATE jobs SET status = 'dead', attempts = $3, last_error = $4, run_at = $5, leased_by = NULL WHERE job_id = $1 AND run_at = $2 RETURNING job_id`;

const releaseSql = `UPDATE jobs SET run_at = $3 WHERE job_id = $1 AND run_at = $2`;

/**
 * Claims up to `limit` jobs due at `now`, oldest first, in one statement that commits on its own, so
 * no lock outlives it. Each returned job's `runAt` is the end of its lease: its claim token.
 */
export async function claimDueJobs(
  dataSource: DataSource,
  now: Date,
  limit: number,
  leaseMsOf: ReadonlyMap<string, number>,
  otherLeaseMs: number,
): Promise<JobRow[]> {
  const raws = await preparedQuery<Record<string, unknown>>(dataSource, claimSql, [
    now,
    limit,
    [...leaseMsOf.keys()],
    [...leaseMsOf.values()],
    otherLeaseMs,
    holderOf(dataSource),
  ]);
  const metadata = dataSource.getMetadata(JobRow);
  return raws.map((raw) => rowFromDatabase<JobRow>(metadata, raw));
}

/** Ends a job run outside a transaction, if its lease is still ours; a job its own handler ended (a final status) is already gone. */
export async function endLeasedJob(dataSource: DataSource, job: JobRow, leasedUntil: Date): Promise<void> {
  await preparedQuery(dataSource, endSql, [job.jobId, leasedUntil]);
}

/**
 * Ends a job in the transaction its handler is to run in, if its lease is still ours; false when it
 * is not, and the handler must not run (another runner has the job). The job's row stays locked
 * until the transaction ends, so the handler's effect and the job's end commit together.
 */
export async function endJobIn(em: EntityManager, job: JobRow, leasedUntil: Date): Promise<boolean> {
  const { affected } = await em.delete(JobRow, { jobId: job.jobId, runAt: leasedUntil });
  return affected === 1;
}

/** Records a failed attempt and when to try again, if the lease is still ours (else the runner holding it decides). */
export async function retryJobLater(
  dataSource: DataSource,
  job: JobRow,
  leasedUntil: Date,
  attempts: number,
  error: string,
  retryAt: Date,
): Promise<void> {
  await preparedQuery(dataSource, retrySql, [job.jobId, leasedUntil, attempts, error, retryAt]);
}

/**
 * Records a failed last attempt: the job is dead as of `diedAt`, kept with its attempts and error and
 * never claimed again, if the lease is still ours; false when it was not (the runner holding it decides).
 */
export async function buryJob(
  dataSource: DataSource,
  job: JobRow,
  leasedUntil: Date,
  attempts: number,
  error: string,
  diedAt: Date,
): Promise<boolean> {
  const rows = await preparedQuery(dataSource, buriedSql, [job.jobId, leasedUntil, attempts, error, diedAt]);
  return rows.length === 1;
}

/**
 * Gives back a job claimed but not begun, due again at `now`, if the lease is still ours: an instance
 * shutting down hands its claimed jobs to the others at once instead of letting their leases run out.
 */
export async function releaseJob(dataSource: DataSource, job: JobRow, leasedUntil: Date, now: Date): Promise<void> {
  await preparedQuery(dataSource, releaseSql, [job.jobId, leasedUntil, now]);
}
