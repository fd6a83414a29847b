import { type DatabaseClient, databaseClient } from "../db/pool.js";
import { log } from "../log.js";

/** How long a stream waits for a notification before it looks anyway: the fallback when none can arrive. */
const longestWaitMs = 1000;

/**
 * Tells this instance's event streams that events committed, on any instance: one connection per
 * instance LISTENs to the `events` channel, which a trigger on the events table notifies after each
 * insert commits (migration 1764800000000). Streams also look on their own every second, so one that
 * missed a notification (the connection was being re-opened, PostgreSQL restarted) only waits longer.
 */
export class EventFeed {
  private client: DatabaseClient | undefined;
  private connecting: Promise<void> | undefined;
  private waiters = new Set<() => void>();
  private closed = false;

  constructor(
    private readonly databaseUrl: string,
    private readonly connectTimeoutMs: number,
  ) {}

  /** Resolves at the next commit of events, after a second at most, or when `signal` aborts. */
  async next(signal: AbortSignal): Promise<void> {
    void this.listen();
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, longestWaitMs);
      signal.addEventListener("abort", done);
      this.waiters.add(done);
    });
  }

  /** Closes the listening connection. */
  async close(): Promise<void> {
    this.closed = true;
    await this.connecting;
    await this.client?.end().catch(() => undefined);
  }

  private listen(): Promise<void> {
    if (this.client !== undefined || this.closed) return Promise.resolve();
    this.connecting ??= this.open().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async open(): Promise<void> {
    // keepAlive: a connection the network cut silently is noticed, and opened again.
    const client = databaseClient(this.databaseUrl, { connectionTimeoutMillis: this.connectTimeoutMs, keepAlive: true });
    client.on("notification", () => this.wakeAll());
    client.on("error", (error) => {
      log.error("event feed connection lost", { error: String(error) });
      if (this.client === client) this.client = undefined;
      void client.end().catch(() => undefined);
    });
    try {
      await client.connect();
      await client.query("LISTEN events");
      this.client = client;
    } catch (error) {
      log.error("event feed could not listen", { error: String(error) });
      await client.end().catch(() => undefined);
    }
  }

  private wakeAll(): void {
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const wake of waiters) wake();
  }
}
