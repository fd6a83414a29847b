import { type DatabaseClient, databaseClient } from "../db/pool.js";
import { log } from "../log.js";
import type { KeyRecord } from "../auth/key-record.js";

/** The channel the api_keys trigger announces every committed change on (migration 1764500000000). */
const channel = "api_key_changed";

/**
 * How long a heartbeat lets this instance trust its cache, counted from when it was sent; a change
 * to a key answers only after this long (plus a margin for clock rates), so by then no instance
 * still trusts a copy of the key from before the change.
 */
const trustMs = 1_000;
const settleMarginMs = 50;
const heartbeatMs = 200;
/** Keys kept at most; beyond that the oldest entries go (a merchant has a handful of keys). */
const maxEntries = 10_000;

/**
 * API keys this instance has read, so that an authenticated request does not need a round trip to
 * PostgreSQL just to find its key, while a revocation still fails the very next request on every
 * instance (decisions §2).
 *
 * Each instance LISTENs on a connection of its own (a direct one: behind a transaction pooler the
 * heartbeat notices it is not in the listening session) and, every 200 ms, sends a heartbeat query
 * on it.
 * PostgreSQL hands a session every notification committed before a query arrives ahead of that
 * query's answer, so once a heartbeat sent at time t is answered, every key change committed
 * before t has emptied the cache, and the cache may be trusted until t + 1 s. A change answers its
 * caller only 1 s after it committed: any heartbeat still lending trust by then was sent after the
 * commit, so that instance has already dropped the key. An instance whose connection breaks or
 * whose heartbeats stall simply stops trusting its cache and reads keys from the database.
 */
export class KeyCache {
  private readonly entries = new Map<string, KeyRecord>();
  /** Bumped whenever the cache is emptied, so a lookup that overlapped a change is not cached. */
  private generation = 0;
  /** performance.now() until which the cache may be used. */
  private trustedUntil = 0;
  private client: Listening | undefined;
  private stopped = false;
  /** Whether the last heartbeat failed, so that a database outage is logged once, not every 200 ms. */
  private failing = false;
  private wake: (() => void) | undefined;
  private readonly running: Promise<void>;

  constructor(private readonly connectionString: string) {
    this.running = this.run();
  }

  /** A copy of the key that is known to be current, or undefined when the database must be asked. */
  get(keyHash: Buffer): KeyRecord | undefined {
    if (performance.now() >= this.trustedUntil) return undefined;
    return this.entries.get(keyHash.toString("base64"));
  }

  /** Taken before a database lookup and handed to `put`, which ignores the result if a key changed meanwhile. */
  mark(): number {
    return this.generation;
  }

  /** Keeps a key read from the database at `mark`; revoked keys are not kept (they fail either way). */
  put(keyHash: Buffer, record: KeyRecord, mark: number): void {
    if (mark !== this.generation || record.revokedAt !== null) return;
    if (this.entries.size >= maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(keyHash.toString("base64"), record);
  }

  /**
   * Resolves once no instance can still trust a copy of a key from before a change that has
   * committed: every instance's trust runs out at most trustMs after the heartbeat that granted it.
   */
  settled(): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, trustMs + settleMarginMs));
  }

  /** Stops the heartbeats and closes the listening connection. */
  async close(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.running;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        this.client ??= await this.listen();
        const sent = performance.now();
        if ((await backendOf(this.client.pg)) !== this.client.backend) {
          // A pooler (PgBouncer in transaction mode) moved us: this session never LISTENed.
          throw new Error(
            "the listening connection is not the session that LISTENs; it needs a direct connection, not a transaction pooler",
          );
        }
        this.trustedUntil = sent + trustMs;
        if (this.failing) log.info("api key cache is listening again");
        this.failing = false;
      } catch (error) {
        // Not awaited: a connection that died without closing would hold the loop until TCP gives up.
        void this.lose(error);
      }
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, heartbeatMs).unref();
      });
    }
    await this.lose(undefined);
  }

  private async listen(): Promise<Listening> {
    const client = databaseClient(this.connectionString, {
      application_name: "payment-service key cache",
      // A heartbeat that does not come back makes the connection count as lost and start over.
      query_timeout: 5_000,
      connectionTimeoutMillis: 5_000,
      keepAlive: true,
    });
    client.on("notification", () => this.empty());
    client.on("error", (error) => {
      if (this.client?.pg === client) void this.lose(error);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${channel}`);
      const listening = { pg: client, backend: await backendOf(client) };
      // Whatever was cached before LISTEN took effect may have missed a change.
      this.empty();
      return listening;
    } catch (error) {
      client.end().catch(() => undefined);
      throw error;
    }
  }

  private empty(): void {
    this.generation++;
    this.entries.clear();
  }

  private async lose(error: unknown): Promise<void> {
    this.trustedUntil = 0;
    this.empty();
    const client = this.client;
    this.client = undefined;
    if (error !== undefined && !this.stopped && !this.failing) {
      log.warn("api key cache lost its notifications; reading keys from the database", {
        error: error instanceof Error ? error.message : String(error),
      });
    }
    if (error !== undefined) this.failing = true;
    await client?.pg.end().catch(() => undefined);
  }
}

/** The listening connection and the server process of its session. */
interface Listening {
  readonly pg: DatabaseClient;
  readonly backend: number;
}

async function backendOf(client: DatabaseClient): Promise<number> {
  const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
  return rows[0]!.pid;
}
