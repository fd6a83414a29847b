import type { DataSource, EntityManager } from "typeorm";
import type { Clock } from "../clock.js";
import { isDatabaseUnavailable } from "../db/errors.js";
import { ReleaseRetries } from "../db/release-retries.js";
import { FailureStreak, log } from "../log.js";
import type { JobRow } from "./job.entity.js";
import { jobLeaseMs } from "../leases.js";
import type { JobKind } from "./kinds.js";
import { buryJob, claimDueJobs, endJobIn, endLeasedJob, releaseJob, retryJobLater } from "./leases.js";
import { Slots } from "./slots.js";

/**
 * What a job that only touches the database does; it runs inside the transaction that deletes the
 * job (if the runner's lease on it still holds), so its effect and the job's end commit together.
 */
export type JobHandler = (em: EntityManager, job: JobRow) => Promise<void>;

/**
 * A job whose work must not run inside a database transaction: it calls out to a processor that
 * may be slow, and commits recovery points of its own before and after. The runner leases the job
 * (moves its run_at `leaseMs` ahead) and commits before running it, and deletes it afterwards if the
 * lease is still its own; if the instance dies meanwhile, the job is due again when the lease ends.
 * So it runs at least once, possibly twice at the same time after a lease ran out: `run` must be
 * idempotent.
 */
export interface LeasedJobHandler {
  readonly leaseMs: number;
  /**
   * Runs the job; "ended" when the outcome it wrote already deleted the job (a final status ends the
   * object's pending jobs in the same statement), so the runner need not send a delete of its own.
   */
  run(job: JobRow): Promise<"ended" | undefined>;
}

/** A job to schedule. */
export interface NewJob {
  readonly kind: JobKind;
  readonly merchantId: string;
  readonly livemode: boolean;
  readonly objectId: string;
  readonly runAt: Date;
}

/** The job of `kind` about the object `objectId` of `owner`'s merchant and environment, due at `runAt`. */
export function jobFor(
  kind: JobKind,
  owner: { readonly merchantId: string; readonly livemode: boolean },
  objectId: string,
  runAt: Date,
): NewJob {
  return { kind, merchantId: owner.merchantId, livemode: owner.livemode, objectId, runAt };
}

/** What a service needs of the job runner: to run at once a job its call made due now. */
export interface JobWaker {
  wake(): void;
}

/** What a runner tells its instance, and asks of it, around its passes. */
export interface JobRunnerHooks {
  /** Runs before each pass over due jobs (the sandbox test clock re-reads its offset there). */
  readonly beforePass?: () => Promise<void> | undefined;
  /** Told of each failed attempt, by the job's kind (the failure metric). */
  readonly failed?: (kind: string) => void;
}

/** How often a runner looks for due jobs, and how many attempts a job gets before it is dead. */
export interface JobRunnerSettings {
  readonly pollMs: number;
  /** JOB_MAX_ATTEMPTS: a job whose attempt of that number fails is dead, kept for an operator to retry (JobService). */
  readonly maxAttempts: number;
}

/** Retry delay after a failed attempt: 10 s, doubling, at most an hour. */
function retryDelayMs(attempts: number): number {
  return Math.min(10_000 * 2 ** (attempts - 1), 3_600_000);
}

/**
 * Jobs running at the same time on one instance. Bounded so that a backlog leaves pooled connections
 * to the requests being served, and a slow processor holds up only its own jobs.
 */
const concurrency = 16;

/**
 * Jobs claimed per statement. Each is leased from its claim, so a batch should not be so much larger
 * than the concurrency that its last jobs wait out their leases for a slot.
 */
const batchSize = 64;

/**
 * The lease of a job run in a transaction (the dispute jobs), and of a job of a kind no handler
 * knows (it only fails): it covers the wait for a slot, after which the transaction's row lock on
 * the job keeps every other runner away.
 */
const transactionalLeaseMs = jobLeaseMs;

/** Upkeep the runner starts in its passes, at most one run of each at a time. */
interface Chore {
  readonly everyMs: number;
  readonly task: () => Promise<unknown>;
  nextAt: number;
  running: Promise<void> | undefined;
}

/**
 * Runs due jobs. A pass claims a batch of due jobs in one statement, leasing each (its run_at moves
 * to the end of the lease, which is the claim token, leases.ts) so any number of instances run side
 * by side without running a job twice while its lease holds, and runs the batch with bounded
 * concurrency; it claims the next batch once the last job of this one has started, for as long as
 * batches come back full. A job whose instance died is due again when its lease ends.
 */
export class JobRunner implements JobWaker {
  private readonly handlers = new Map<string, JobHandler | LeasedJobHandler>();
  private readonly leaseMsOf = new Map<string, number>();
  private readonly slots = new Slots(concurrency);
  private started = false;
  /** While stop() waits: a claimed job whose turn comes then is given back rather than run, and no more are claimed. */
  private stopping = false;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private readonly tickFailures = new FailureStreak("the job runner's look for due jobs");
  private wokenDuringTick = false;
  private readonly upkeep: Chore[] = [];
  /**
   * Failed attempts the database could not record when they failed (it had gone: a failover, a
   * restart), recorded once it is back: left to its lease instead, such a job would wait a minute.
   */
  private readonly unrecorded = new ReleaseRetries();

  constructor(
    private readonly dataSource: DataSource,
    private readonly clock: Clock,
    private readonly settings: JobRunnerSettings,
    private readonly hooks: JobRunnerHooks = {},
  ) {}

  /** Adds the handlers of one resource's job kinds. */
  register(handlers: ReadonlyMap<JobKind, JobHandler | LeasedJobHandler>): void {
    for (const [kind, handler] of handlers) {
      this.handlers.set(kind, handler);
      this.leaseMsOf.set(kind, typeof handler === "function" ? transactionalLeaseMs : handler.leaseMs);
    }
  }

  /**
   * Adds upkeep that runs at most every `everyMs` on each instance, in the runner's passes (reaping
   * expired idempotency keys). It must be safe to run on several instances at once.
   */
  every(everyMs: number, task: () => Promise<unknown>): void {
    this.upkeep.push({ everyMs, task, nextAt: 0, running: undefined });
  }

  /** Starts polling. */
  start(): void {
    this.started = true;
    this.stopping = false;
    this.schedule(this.settings.pollMs);
  }

  /**
   * Runs due jobs now rather than at the next poll: called once a write that created a job due at
   * once (an instant refund) has committed, so it runs within milliseconds on this instance.
   */
  wake(): void {
    if (!this.started) return;
    if (this.running !== undefined) this.wokenDuringTick = true;
    else this.schedule(0);
  }

  /**
   * Stops polling and waits for the jobs already begun; those claimed but still waiting for a slot are
   * given back, due at once for another instance, rather than run or left until their leases end.
   */
  async stop(): Promise<void> {
    this.started = false;
    this.stopping = true;
    clearTimeout(this.timer);
    await this.running;
    await this.slots.drained();
    await this.upkeepRun();
    this.stopping = false;
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.tick(), delayMs);
  }

  private tick(): void {
    this.running = this.pass(() => this.started)
      .then(() => this.tickFailures.succeeded())
      .catch((error: unknown) => this.tickFailures.failed(error))
      .finally(() => {
        this.running = undefined;
        const again = this.wokenDuringTick;
        this.wokenDuringTick = false;
        if (this.started) this.schedule(again ? 0 : this.settings.pollMs);
      });
  }

  /**
   * Runs every job due now, in batches, and returns once they have all run: those of this pass, and
   * those this instance's polling pass had claimed meanwhile, which this pass skipped as locked or
   * leased; and once the upkeep due now has run. Returns how many this pass ran (a job that failed counts, one whose lease was lost does not).
   */
  async runDue(): Promise<number> {
    const ran = await this.pass(() => true);
    await this.running;
    await this.upkeepRun();
    return ran;
  }

  /** Resolves once the upkeep under way has ended. */
  private async upkeepRun(): Promise<void> {
    await Promise.all(this.upkeep.map((chore) => chore.running));
  }

  /** A pass over due jobs, claiming batch after batch while they come back full and `goOn` agrees. */
  private async pass(goOn: () => boolean): Promise<number> {
    await this.hooks.beforePass?.();
    const outcomes: Promise<boolean>[] = [];
    try {
      for (;;) {
        // Looked at before every batch, not only when a pass begins: a backlog keeps one pass
        // claiming full batches for as long as it lasts, and the reapers must not wait for its end.
        this.startDueUpkeep();
        const batch = await claimDueJobs(this.dataSource, this.clock.now(), batchSize, this.leaseMsOf, transactionalLeaseMs);
        const runs = batch.map((job) => this.slots.run(() => this.settle(job)));
        outcomes.push(...runs.map((run) => run.ended));
        if (batch.length < batchSize || !goOn() || this.stopping) break;
        // Claiming more before this batch is under way would only start more leases waiting for a slot.
        await runs.at(-1)!.started;
      }
    } catch (error) {
      // The jobs already claimed still run to their end before the pass does.
      await Promise.all(outcomes);
      throw error;
    }
    return (await Promise.all(outcomes)).filter(Boolean).length;
  }

  /** Starts each chore whose time has come and that is not still running, without waiting for it. */
  private startDueUpkeep(): void {
    const now = this.clock.now().getTime();
    // Upkeep runs beside the jobs, never ahead of them: a long reaping must not hold up a due capture.
    for (const chore of this.upkeep) {
      if (chore.nextAt > now || chore.running !== undefined) continue;
      chore.nextAt = now + chore.everyMs;
      chore.running = chore
        .task()
        .then(
          () => undefined,
          (error: unknown) => log.error("job runner upkeep failed", { error: String(error) }),
        )
        .finally(() => {
          chore.running = undefined;
        });
    }
  }

  /**
   * Runs one leased job and ends it, or records its failure; false when the lease was no longer ours
   * (it ran out while the job waited for a slot, or another runner holds the job). Never rejects: a
   * failure that cannot even be recorded is logged, and the job is due again when its lease ends.
   */
  private async settle(job: JobRow): Promise<boolean> {
    const leasedUntil = job.runAt;
    if (this.clock.now() >= leasedUntil) return false;
    if (this.stopping) return this.giveBack(job, leasedUntil);
    try {
      const handler = this.handlers.get(job.kind);
      if (handler === undefined) throw new Error(`no handler for job kind ${job.kind}`);
      if (typeof handler !== "function") {
        if ((await handler.run(job)) !== "ended") await endLeasedJob(this.dataSource, job, leasedUntil);
        return true;
      }
      return await this.dataSource.transaction(async (em) => {
        if (!(await endJobIn(em, job, leasedUntil))) return false;
        await handler(em, job);
        return true;
      });
    } catch (error) {
      await this.recordFailure(job, leasedUntil, error);
      return true;
    }
  }

  /** Hands a job back unrun (false: it did not run); one that cannot be handed back is due again when its lease ends. */
  private async giveBack(job: JobRow, leasedUntil: Date): Promise<false> {
    try {
      await releaseJob(this.dataSource, job, leasedUntil, this.clock.now());
    } catch (error) {
      log.error("claimed job not given back; it is due again when its lease ends", {
        kind: job.kind,
        object_id: job.objectId,
        error: String(error),
      });
    }
    return false;
  }

  /**
   * Records a failed attempt: the job is tried again later, or, when this was its last allowed
   * attempt, it is dead, which is logged once (by the runner whose lease recorded it).
   */
  private async recordFailure(job: JobRow, leasedUntil: Date, error: unknown): Promise<void> {
    const attempts = job.attempts + 1;
    this.hooks.failed?.(job.kind);
    const facts = { kind: job.kind, object_id: job.objectId, attempts, error: String(error) };
    try {
      if (attempts < this.settings.maxAttempts) {
        log.error("job failed", facts);
        const retryAt = new Date(this.clock.now().getTime() + retryDelayMs(attempts));
        await retryJobLater(this.dataSource, job, leasedUntil, attempts, String(error), retryAt);
      } else if (await buryJob(this.dataSource, job, leasedUntil, attempts, String(error), this.clock.now())) {
        log.error("job dead: its last allowed attempt failed; it runs again only once an operator retries it", {
          ...facts,
          job_id: job.jobId,
        });
      } else {
        log.error("job failed", facts);
      }
    } catch (recording) {
      if (isDatabaseUnavailable(recording) && attempts < this.settings.maxAttempts) {
        const retryAt = new Date(this.clock.now().getTime() + retryDelayMs(attempts));
        const leaseLeftMs = leasedUntil.getTime() - this.clock.now().getTime();
        this.unrecorded.add(
          `${job.jobId} ${leasedUntil.getTime()}`,
          () => retryJobLater(this.dataSource, job, leasedUntil, attempts, String(error), retryAt),
          leaseLeftMs,
        );
        log.error("job failure not recorded yet; recorded once the database is back", { ...facts, error: String(recording) });
      } else {
        log.error("job failure not recorded", { kind: job.kind, object_id: job.objectId, error: String(recording) });
      }
    }
  }
}
