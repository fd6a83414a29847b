import { randomInt } from "node:crypto";
import type { DataSource } from "typeorm";
import { log } from "../log.js";
import { type DatabaseClient, databaseClient } from "./pool.js";

/*
 * Leases (a job's, an operation's claim on a payment or refund, an idempotency key in flight) last
 * 60 s, longer than any processor takes to answer, so that an instance that died holding one does not
 * block its object for ever. Waiting those 60 s after a kill -9 is what made retries answer IK_01 and
 * refunds and payouts wait a minute. So each lease also names its holder, and a holder is alive while
 * its session advisory lock is held: PostgreSQL releases that lock the moment the holder's connection
 * closes, which a killed process's does at once. A lease whose holder is gone is taken over then; the
 * 60 s remain for a holder whose connection hangs without closing. Taking over is what the expiry of
 * a lease already did, so it needs no new safety: the holder's writes are conditioned on its token,
 * and processor calls carry idempotency keys.
 */

/** The first key of every instance's advisory lock ("live" in ASCII); the migration's live_instances() reads it. */
const livenessLockClass = 1819047525;

/** Pause before opening the liveness connection again after it was lost. */
const reconnectMs = 1000;

/**
 * SQL condition, true when the lease holder in `column` is known to be gone. A lease written without
 * a holder (by a version before this one) is left to its expiry.
 */
export function holderGone(column: string): string {
  return `(${column} IS NOT NULL AND ${column} NOT IN (SELECT live_instances()))`;
}

/** Each open data source's instance id, so the statements that lease something on it say who holds the lease. */
const instances = new WeakMap<DataSource, number>();

/** The id this instance's leases carry, or null for a data source no instance opened (its leases only expire). */
export function holderOf(dataSource: DataSource): number | null {
  return instances.get(dataSource) ?? null;
}

/**
 * This instance's proof of life: a connection of its own holding the session advisory lock of its id
 * for as long as the instance runs. If the connection is lost the lock is gone and other instances may
 * take over this one's leases (safe, as above); it is opened again and the lock taken again.
 */
export class InstanceLiveness {
  private client: DatabaseClient | undefined;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;

  private constructor(
    private readonly databaseUrl: string,
    /** Positive and random, so ids of instances past and present do not meet. */
    readonly id: number,
  ) {}

  /** Takes the lock of a fresh id for `dataSource`'s instance and registers the id as the holder of its leases. */
  static async open(dataSource: DataSource, databaseUrl: string): Promise<InstanceLiveness> {
    for (;;) {
      const liveness = new InstanceLiveness(databaseUrl, randomInt(1, 2 ** 31 - 1));
      if (await liveness.hold()) {
        instances.set(dataSource, liveness.id);
        return liveness;
      }
      await liveness.close();
    }
  }

  /** Releases the lock: this instance's leases may be taken over from now on. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    await this.client?.end().catch(() => undefined);
  }

  /** Connects and takes the lock; false when another session holds it (an id already taken). */
  private async hold(): Promise<boolean> {
    const client = databaseClient(this.databaseUrl);
    client.on("error", (error) => {
      log.error("instance liveness connection lost", { error: String(error) });
      if (this.client === client) this.client = undefined;
      void client.end().catch(() => undefined);
      this.reopenLater();
    });
    await client.connect();
    const [row] = (await client.query<{ held: boolean }>("SELECT pg_try_advisory_lock($1, $2) AS held", [livenessLockClass, this.id])).rows;
    if (row?.held !== true) {
      await client.end().catch(() => undefined);
      return false;
    }
    this.client = client;
    return true;
  }

  private reopenLater(): void {
    if (this.closed || this.retry !== undefined) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      if (this.closed || this.client !== undefined) return;
      this.hold()
        .then((held) => {
          if (!held) log.error("instance liveness lock taken by another session", { instance: this.id });
        })
        .catch((error: unknown) => {
          log.error("instance liveness connection not reopened", { error: String(error) });
          this.reopenLater();
        });
    }, reconnectMs);
  }
}
