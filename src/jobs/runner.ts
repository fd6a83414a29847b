import type { DataSource, EntityManager } from "typeorm";
import type { Clock } from "../clock.js";
import { log } from "../log.js";
import { JobRow } from "./job.entity.js";
import type { JobKind } from "./kinds.js";

/** What a job does; it runs inside the transaction that deletes the job, so its effect and the job's end commit together. */
export type JobHandler = (em: EntityManager, job: JobRow) => Promise<void>;

/**
 * A job whose work must not run inside a database transaction: it calls out to a processor that
 * may be slow, and commits recovery points of its own before and after. The runner leases the job
 * (moves its run_at `leaseMs` ahead) and commits before running it, and deletes it afterwards; if
 * the instance dies meanwhile, the job is due again when the lease ends. So it runs at least once,
 * possibly twice at the same time after a lease ran out: `run` must be idempotent.
 */
export interface LeasedJobHandler {
  readonly leaseMs: number;
  run(job: JobRow): Promise<void>;
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

/** Retry delay after a failed attempt: 10 s, doubling, at most an hour. */
function retryDelayMs(attempts: number): number {
  return Math.min(10_000 * 2 ** (attempts - 1), 3_600_000);
}

/**
 * Runs due jobs. Each job is claimed with `FOR UPDATE SKIP LOCKED` in its own transaction, so any
 * number of instances can run side by side without running a job twice, and a crash mid-job rolls
 * back to a job that is still there.
 */
export class JobRunner implements JobWaker {
  private readonly handlers = new Map<string, JobHandler | LeasedJobHandler>();
  private started = false;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private wokenDuringTick = false;
  private readonly upkeep: { readonly everyMs: number; readonly task: () => Promise<unknown>; nextAt: number }[] = [];

  /** `beforePass` runs before each pass over due jobs (the sandbox test clock re-reads its offset there). */
  constructor(
    private readonly dataSource: DataSource,
    private readonly clock: Clock,
    private readonly pollMs: number,
    private readonly beforePass: () => Promise<void> | undefined = () => undefined,
  ) {}

  /** Adds the handlers of one resource's job kinds. */
  register(handlers: ReadonlyMap<JobKind, JobHandler | LeasedJobHandler>): void {
    for (const [kind, handler] of handlers) this.handlers.set(kind, handler);
  }

  /**
   * Adds upkeep that runs at most every `everyMs` on each instance, in the runner's passes (reaping
   * expired idempotency keys). It must be safe to run on several instances at once.
   */
  every(everyMs: number, task: () => Promise<unknown>): void {
    this.upkeep.push({ everyMs, task, nextAt: 0 });
  }

  /** Starts polling. */
  start(): void {
    this.started = true;
    this.schedule(this.pollMs);
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

  /** Stops polling and waits for the job in progress. */
  async stop(): Promise<void> {
    this.started = false;
    clearTimeout(this.timer);
    await this.running;
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.tick(), delayMs);
  }

  private tick(): void {
    this.running = this.runDue()
      .then(() => undefined)
      .catch((error: unknown) => log.error("job runner tick failed", { error: String(error) }))
      .finally(() => {
        this.running = undefined;
        const again = this.wokenDuringTick;
        this.wokenDuringTick = false;
        if (this.started) this.schedule(again ? 0 : this.pollMs);
      });
  }

  /** Runs every job due now, one transaction each; returns how many ran. */
  async runDue(): Promise<number> {
    await this.beforePass();
    const now = this.clock.now().getTime();
    for (const chore of this.upkeep) {
      if (chore.nextAt > now) continue;
      chore.nextAt = now + chore.everyMs;
      await chore.task();
    }
    let ran = 0;
    while (await this.runOne()) ran++;
    return ran;
  }

  private async runOne(): Promise<boolean> {
    const now = this.clock.now();
    let claimed: JobRow | undefined;
    let leased: LeasedJobHandler | undefined;
    try {
      await this.dataSource.transaction(async (em) => {
        claimed =
          (await em
            .createQueryBuilder(JobRow, "j")
            .where("j.run_at <= :now", { now })
            .orderBy("j.run_at")
            .limit(1)
            .setLock("pessimistic_write")
            .setOnLocked("skip_locked")
            .getOne()) ?? undefined;
        if (claimed === undefined) return;
        const handler = this.handlers.get(claimed.kind);
        if (handler === undefined) throw new Error(`no handler for job kind ${claimed.kind}`);
        if (typeof handler === "function") {
          await handler(em, claimed);
          await em.delete(JobRow, { jobId: claimed.jobId });
        } else {
          leased = handler;
          await em.update(JobRow, { jobId: claimed.jobId }, { runAt: new Date(now.getTime() + handler.leaseMs) });
        }
      });
      if (leased !== undefined && claimed !== undefined) {
        await leased.run(claimed);
        await this.dataSource.getRepository(JobRow).delete({ jobId: claimed.jobId });
      }
    } catch (error) {
      if (claimed === undefined) throw error;
      await this.recordFailure(claimed, error, now);
    }
    return claimed !== undefined;
  }

  private async recordFailure(job: JobRow, error: unknown, now: Date): Promise<void> {
    const attempts = job.attempts + 1;
    log.error("job failed", { kind: job.kind, object_id: job.objectId, attempts, error: String(error) });
    await this.dataSource
      .getRepository(JobRow)
      .update({ jobId: job.jobId }, { attempts, lastError: String(error), runAt: new Date(now.getTime() + retryDelayMs(attempts)) });
  }
}
