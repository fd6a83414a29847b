import { Gauge, type Registry } from "prom-client";
import type { DataSource } from "typeorm";
import type { Clock } from "../clock.js";
import { jobKinds } from "../jobs/kinds.js";

/**
 * How long each scrape-time query may take, in the database (statement_timeout) and waiting for a
 * pooled connection: a slow or unreachable database makes the scrape report the query failed
 * (`…_scrape_query_up` 0) rather than hang it past Prometheus's own timeout.
 */
const queryBudgetMs = 1_000;

interface JobRow {
  readonly kind: string;
  readonly queued: number;
  readonly due: number;
  readonly lag: number;
  readonly dead: number;
}

/** What the database says at one scrape; undefined where its query failed or ran out of time. */
interface Snapshot {
  readonly jobs: readonly JobRow[] | undefined;
  readonly pending: { readonly count: number; readonly lag: number } | undefined;
  readonly failed: number | undefined;
  readonly idempotencyKeys: number | undefined;
}

/** Runs one statement in a transaction of its own bounded by the budget, in the database and in waiting. */
async function withinBudget<Row>(dataSource: DataSource, sql: string, params: unknown[]): Promise<Row[] | undefined> {
  const query = dataSource.transaction(async (em) => {
    await em.query(`SET LOCAL statement_timeout = ${queryBudgetMs}`);
    return (await em.query(sql, params)) as Row[];
  });
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), queryBudgetMs);
  });
  try {
    return await Promise.race([query.catch(() => undefined), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Gauges read from the database when a scrape asks, since the facts live in tables every instance
 * shares (the job queue, webhook deliveries, idempotency keys) or in a thread of their own (the
 * webhook sender): each instance reports the same database-wide values. Four small queries, each
 * bounded by the budget; the jobs and the failed deliveries are counted by scanning their tables,
 * which stay small while jobs and webhooks work (ended jobs are deleted, dead ones wait for an operator).
 */
export class DatabaseGauges {
  /** The queries under way: a scrape collects every gauge at once, and they share one run of them. */
  private inFlight: Promise<Snapshot> | undefined;

  constructor(
    private readonly dataSource: DataSource,
    private readonly clock: Clock,
    prefix: string,
    registry: Registry,
  ) {
    const registers = [registry];
    const read = () => this.read();
    // Every instance reports the same database-wide value: aggregated over cluster workers, one is kept.
    const shared = { registers, aggregator: "first" as const };
    new Gauge({
      ...shared,
      name: `${prefix}jobs_queued`,
      help: "Jobs in the queue by kind, due or scheduled for later (the jobs table's pending jobs; dead ones are in jobs_dead).",
      labelNames: ["kind"],
      async collect() {
        const jobs = (await read()).jobs;
        if (jobs !== undefined) setPerKind(this, jobs, (row) => row.queued);
      },
    });
    new Gauge({
      ...shared,
      name: `${prefix}jobs_due`,
      help: "Jobs due now and not being run (no runner holds their lease), by kind.",
      labelNames: ["kind"],
      async collect() {
        const jobs = (await read()).jobs;
        if (jobs !== undefined) setPerKind(this, jobs, (row) => row.due);
      },
    });
    new Gauge({
      ...shared,
      name: `${prefix}jobs_lag_seconds`,
      help: "How long the oldest due job of each kind has been waiting to run (0 when none is due).",
      labelNames: ["kind"],
      async collect() {
        const jobs = (await read()).jobs;
        if (jobs !== undefined) setPerKind(this, jobs, (row) => row.lag);
      },
    });
    new Gauge({
      ...shared,
      name: `${prefix}jobs_dead`,
      help: "Jobs that failed their last allowed attempt (JOB_MAX_ATTEMPTS), by kind: never run again until an operator retries them.",
      labelNames: ["kind"],
      async collect() {
        const jobs = (await read()).jobs;
        if (jobs !== undefined) setPerKind(this, jobs, (row) => row.dead);
      },
    });
    new Gauge({
      ...shared,
      name: `${prefix}webhook_deliveries_pending`,
      help: "Webhook deliveries not yet delivered and still being retried.",
      async collect() {
        const pending = (await read()).pending;
        if (pending !== undefined) this.set(pending.count);
      },
    });
    new Gauge({
      ...shared,
      name: `${prefix}webhook_delivery_lag_seconds`,
      help: "Age of the oldest pending webhook delivery (0 when none is pending).",
      async collect() {
        const pending = (await read()).pending;
        if (pending !== undefined) this.set(pending.lag);
      },
    });
    new Gauge({
      ...shared,
      name: `${prefix}webhook_deliveries_failed`,
      help: "Webhook deliveries that failed for good (their retry window ended), as the table holds them.",
      async collect() {
        const failed = (await read()).failed;
        if (failed !== undefined) this.set(failed);
      },
    });
    new Gauge({
      ...shared,
      name: `${prefix}idempotency_keys`,
      help: "Rows of the idempotency key table: PostgreSQL's estimate (pg_class.reltuples), counted until it has one.",
      async collect() {
        const keys = (await read()).idempotencyKeys;
        if (keys !== undefined) this.set(keys);
      },
    });
    new Gauge({
      ...shared,
      name: `${prefix}scrape_query_up`,
      help: "Whether each scrape-time database query answered within its budget (1) or not (0).",
      labelNames: ["query"],
      async collect() {
        const snapshot = await read();
        this.set({ query: "jobs" }, snapshot.jobs === undefined ? 0 : 1);
        this.set({ query: "webhook_pending" }, snapshot.pending === undefined ? 0 : 1);
        this.set({ query: "webhook_failed" }, snapshot.failed === undefined ? 0 : 1);
        this.set({ query: "idempotency_keys" }, snapshot.idempotencyKeys === undefined ? 0 : 1);
      },
    });
  }

  /** The database's answers for the scrape under way: queried once, however many gauges read them. */
  private read(): Promise<Snapshot> {
    this.inFlight ??= this.query().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  private async query(): Promise<Snapshot> {
    const now = this.clock.now();
    const [jobs, pending, failed, idempotencyKeys] = await Promise.all([
      withinBudget<JobRow>(
        this.dataSource,
        `SELECT kind, (count(*) FILTER (WHERE status = 'pending'))::int AS queued,
           (count(*) FILTER (WHERE status = 'pending' AND run_at <= $1))::int AS due,
           coalesce(extract(epoch FROM $1 - min(run_at) FILTER (WHERE status = 'pending' AND run_at <= $1)), 0)::float8 AS lag,
           (count(*) FILTER (WHERE status = 'dead'))::int AS dead
         FROM jobs GROUP BY kind`,
        [now],
      ),
      withinBudget<{ count: number; lag: number }>(
        this.dataSource,
        `SELECT count(*)::int AS count, coalesce(extract(epoch FROM $1 - min(created)), 0)::float8 AS lag
         FROM webhook_deliveries WHERE status = 'pending'`,
        [now],
      ),
      withinBudget<{ count: number }>(this.dataSource, `SELECT count(*)::int AS count FROM webhook_deliveries WHERE status = 'failed'`, []),
      withinBudget<{ count: number }>(
        this.dataSource,
        // reltuples is -1 until the table is first analyzed; a table never analyzed is a small one.
        `SELECT CASE WHEN c.reltuples >= 0 THEN c.reltuples::bigint ELSE (SELECT count(*) FROM idempotency_keys) END::float8 AS count
         FROM pg_class c WHERE c.oid = 'idempotency_keys'::regclass`,
        [],
      ),
    ]);
    return {
      jobs,
      pending: pending?.[0] === undefined ? undefined : { count: Number(pending[0].count), lag: Math.max(Number(pending[0].lag), 0) },
      failed: failed?.[0] === undefined ? undefined : Number(failed[0].count),
      idempotencyKeys: idempotencyKeys?.[0] === undefined ? undefined : Number(idempotencyKeys[0].count),
    };
  }
}

/** Sets a per-kind gauge: every known kind present (0 when it has no jobs), plus any other kind the table holds. */
function setPerKind(gauge: Gauge<"kind">, rows: readonly JobRow[], value: (row: JobRow) => number): void {
  gauge.reset();
  for (const kind of Object.values(jobKinds)) gauge.set({ kind }, 0);
  for (const row of rows) gauge.set({ kind: row.kind }, Math.max(Number(value(row)), 0));
}
