/**
 * How long a readiness probe waits for the database. Kubernetes gives a probe one second by
 * default: an answer of NOT_SERVING in time is worth more than SERVING too late.
 */
const databaseTimeoutMs = 800;

/**
 * How long one probe's answer stands. Health checks need no API key, so anyone may send them; a
 * storm of them costs at most one database query per instance per interval.
 */
const probeReuseMs = 1_000;

/** Where a probe asks: on PostgreSQL a connection of the probe's own (ProbeConnection), else the data source. */
export interface ProbeDatabase {
  query(text: string, params: unknown[]): Promise<unknown[]>;
}

/**
 * Whether this instance can serve calls: its database answers, every migration it knows is applied,
 * and it is not shutting down. Load balancers and orchestrators (Kubernetes gRPC probes,
 * grpc_health_probe) read it through grpc.health.v1.Health, and stop sending calls when it is not.
 */
export class Readiness {
  private closing = false;
  private readonly closingListeners = new Set<() => void>();
  private probe: { readonly at: number; readonly ready: Promise<boolean> } | undefined;

  constructor(
    private readonly database: ProbeDatabase,
    /** The name TypeORM records for each migration of this release once applied. */
    private readonly migrationNames: readonly string[],
    private readonly now: () => number = Date.now,
  ) {}

  /** Marks the instance as shutting down, from now on and for good, and tells every watcher at once. */
  beginClosing(): void {
    if (this.closing) return;
    this.closing = true;
    for (const listener of this.closingListeners) listener();
    this.closingListeners.clear();
  }

  /** Whether shutdown has begun: then nothing will make the instance ready again. */
  get isClosing(): boolean {
    return this.closing;
  }

  /** Whether the instance can serve calls now; never rejects (a database that fails is not ready). */
  async isReady(): Promise<boolean> {
    if (this.closing) return false;
    const now = this.now();
    if (this.probe === undefined || now - this.probe.at >= probeReuseMs) {
      this.probe = { at: now, ready: this.databaseReady() };
    }
    return (await this.probe.ready) && !this.closing;
  }

  /**
   * Resolves after `ms`, when shutdown begins, or when `signal` aborts, whichever comes first: a
   * watcher's pause between probes that shutdown cuts short.
   */
  pause(ms: number, signal: AbortSignal): Promise<void> {
    if (this.closing || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.closingListeners.delete(done);
        signal.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.closingListeners.add(done);
      signal.addEventListener("abort", done, { once: true });
    });
  }

  /** One query that both needs the database to answer and says whether every migration is applied. */
  private async databaseReady(): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), databaseTimeoutMs);
    });
    const applied = this.database
      .query("SELECT count(DISTINCT name)::int AS applied FROM migrations WHERE name = ANY($1)", [this.migrationNames])
      .then((rows) => (rows as { applied: number }[])[0]?.applied === this.migrationNames.length)
      .catch(() => false);
    try {
      return await Promise.race([applied, timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }
}
