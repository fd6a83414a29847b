/** Counts the requests of one key in one fixed window; the window's key expires with it. */
export interface WindowCounter {
  /** Adds one request to `key` and returns the window's count so far, this one included. */
  increment(key: string, windowMs: number): Promise<number>;
  /** The window's count so far without adding to it: whether an address is already refused, before any work. */
  current(key: string): Promise<number>;
  close(): Promise<void>;
}

/**
 * Counters in this process: exact for a single instance, and the fallback while Redis is
 * unreachable. Keys carry their window, so a new window starts at zero; old windows are swept
 * once they pile up.
 */
export class MemoryCounter implements WindowCounter {
  private readonly counts = new Map<string, { count: number; expiresAt: number }>();

  constructor(private readonly now: () => number) {}

  async increment(key: string, windowMs: number): Promise<number> {
    const now = this.now();
    const entry = this.counts.get(key);
    if (entry !== undefined && entry.expiresAt > now) return ++entry.count;
    if (this.counts.size >= 10_000) this.sweep(now);
    this.counts.set(key, { count: 1, expiresAt: now + windowMs });
    return 1;
  }

  async current(key: string): Promise<number> {
    const entry = this.counts.get(key);
    return entry !== undefined && entry.expiresAt > this.now() ? entry.count : 0;
  }

  private sweep(now: number): void {
    for (const [key, entry] of this.counts) if (entry.expiresAt <= now) this.counts.delete(key);
  }

  async close(): Promise<void> {}
}
