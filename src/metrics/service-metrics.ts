import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type pg from "pg";
import type { DataSource } from "typeorm";
import type { Clock } from "../clock.js";
import { poolOf } from "../db/pool.js";
import type { RequestRecord } from "../transport/request-record.js";
import { DatabaseGauges } from "./database-gauges.js";
import { PrimaryLocator } from "../db/primary.js";

/** Prefix of every metric of ours, so they sort together and never clash with an exporter's. */
const prefix = "paymentservice_";

/**
 * Request latency buckets in seconds: most calls take milliseconds, a payment through a slow
 * processor seconds, and a deadline may let one run to tens of seconds.
 */
const latencyBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * Label of a request no route took (an unknown path or RPC): every such request shares it, so a
 * scan of random paths cannot grow the number of series.
 */
export const unroutedProcedure = "unrouted";

/** Label of a request answered without a documented error. */
export const successCode = "OK";

/**
 * One instance's Prometheus metrics in a registry of its own (never prom-client's global one): tests
 * run several instances in one process, and each must report only itself. Requests, job failures and
 * rate-limit fallbacks are counted as they happen; the pool is read and the database's queues are
 * queried when a scrape asks (DatabaseGauges).
 */
export class ServiceMetrics {
  readonly registry = new Registry();
  private readonly requests: Counter<"procedure" | "protocol" | "code">;
  private readonly latency: Histogram<"procedure" | "protocol">;
  private readonly jobFailures: Counter<"kind">;
  private readonly fallbacks: Counter;

  constructor(dataSource: DataSource, clock: Clock, databaseUrl: string) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.requests = new Counter({
      name: `${prefix}requests_total`,
      help: "Requests answered, by procedure (or page), wire protocol and documented error code (OK when none).",
      labelNames: ["procedure", "protocol", "code"],
      registers,
    });
    this.latency = new Histogram({
      name: `${prefix}request_duration_seconds`,
      help: "Time from a request's arrival to the end of its answer, by procedure and wire protocol.",
      labelNames: ["procedure", "protocol"],
      buckets: latencyBuckets,
      registers,
    });
    this.jobFailures = new Counter({
      name: `${prefix}job_failures_total`,
      help: "Job attempts that failed (and were scheduled for a retry), by kind.",
      labelNames: ["kind"],
      registers,
    });
    this.fallbacks = new Counter({
      name: `${prefix}rate_limit_fallbacks_total`,
      help: "Rate-limit checks counted on this instance only because Redis did not answer (fail open).",
      registers,
    });
    // The pg pool behind TypeORM, read at each scrape; absent once the data source is destroyed.
    const pool = (): pg.Pool | undefined => (dataSource.isInitialized ? poolOf(dataSource) : undefined);
    const poolGauge = (name: string, help: string, read: (counts: pg.Pool) => number) =>
      new Gauge({
        name: `${prefix}${name}`,
        help,
        registers,
        collect() {
          const counts = pool();
          if (counts !== undefined) this.set(read(counts));
        },
      });
    poolGauge("db_pool_connections", "Connections the database pool holds (busy and idle).", (c) => c.totalCount);
    poolGauge("db_pool_idle_connections", "Connections of the pool not in use.", (c) => c.idleCount);
    poolGauge("db_pool_waiting_requests", "Queries waiting for a connection of the pool.", (c) => c.waitingCount);
    const locator = PrimaryLocator.of(databaseUrl);
    new Gauge({
      name: `${prefix}db_primary`,
      help: "1 for the database host this instance's connections go to (the primary, with several hosts in DATABASE_URL).",
      labelNames: ["host"],
      registers,
      collect() {
        this.reset();
        const host = locator.primary;
        if (host !== undefined) this.set({ host: host.label }, 1);
      },
    });
    new Counter({
      name: `${prefix}db_primary_changes_total`,
      help: "Times this instance's connections moved to another database host: a failover or a switchover it followed.",
      registers,
      collect() {
        this.reset();
        this.inc(locator.changes);
      },
    });
    new DatabaseGauges(dataSource, clock, prefix, this.registry);
  }

  /** Counts a request once it has ended, with its latency: called where its log line is written. */
  requestEnded(record: RequestRecord): void {
    const procedure = record.procedure ?? unroutedProcedure;
    this.requests.inc({ procedure, protocol: record.protocol, code: record.code ?? successCode });
    this.latency.observe({ procedure, protocol: record.protocol }, record.durationMs() / 1000);
  }

  /** Counts a failed job attempt. */
  jobFailed(kind: string): void {
    this.jobFailures.inc({ kind });
  }

  /** Counts a rate-limit check that went ahead without Redis. */
  rateLimitFellBack(): void {
    this.fallbacks.inc();
  }

  /** The text a Prometheus scrape receives. */
  scrape(): Promise<string> {
    return this.registry.metrics();
  }
}
