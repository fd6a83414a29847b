import { type DatabaseClient, databaseClient } from "../db/pool.js";

/** Longest a probe connection waits to connect or for an answer before it is dropped and opened afresh. */
const giveUpMs = 5_000;

/**
 * The readiness probe's own PostgreSQL connection, outside the instance's pool. Under load every
 * pooled connection can be busy for longer than a probe may wait: a probe queued behind them
 * reported a busy but healthy instance as NOT_SERVING, on every busy instance at once, and a load
 * balancer then took them all out and answered 503 to everyone. On its own connection the probe
 * measures the database, not the pool's queue.
 */
export class ProbeConnection {
  private client: Promise<DatabaseClient> | undefined;

  constructor(private readonly connectionString: string) {}

  /** Runs one probe query; a failure drops the connection, so the next probe connects afresh. */
  async query(text: string, params: unknown[]): Promise<unknown[]> {
    this.client ??= this.connect();
    const client = this.client;
    try {
      return (await (await client).query(text, params)).rows;
    } catch (error) {
      if (this.client === client) this.client = undefined;
      void client.then((c) => c.end()).catch(() => undefined);
      throw error;
    }
  }

  /** Closes the connection, if one is open. */
  async close(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    await client?.then((c) => c.end()).catch(() => undefined);
  }

  private async connect(): Promise<DatabaseClient> {
    const client = databaseClient(this.connectionString, { connectionTimeoutMillis: giveUpMs, query_timeout: giveUpMs });
    // A connection that breaks between probes fails the next probe's query, which drops it; this
    // listener only keeps the break from being an unhandled error.
    client.on("error", () => undefined);
    await client.connect();
    return client;
  }
}
