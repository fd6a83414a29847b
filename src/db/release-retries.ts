/** How often releases the database refused are tried again. */
const retryEveryMs = 250;
/** Releases kept at most; beyond, an object waits for its lease to end, as it would after a crash. */
const maxPending = 10_000;

/** A release still to be made, and after when it no longer matters (the lease it ends has ended by itself). */
interface Pending {
  readonly release: () => Promise<unknown>;
  readonly until: number;
}

/**
 * Makes, as soon as the database is back, the releases that failed because it was not there: an
 * idempotency key or a payment claimed by a call that then failed. Without them every retry of that
 * call would be refused (IK_01) or kept waiting until the lease ends, a minute, long after the
 * database has recovered. A release only frees what is still held under its own token, so one that
 * comes late changes nothing that moved on meanwhile (a key whose effect committed after all, a claim
 * a retry took over). The lease remains what ends a claim whose release is never made (a crash).
 */
export class ReleaseRetries {
  private readonly pending = new Map<string, Pending>();
  private timer: NodeJS.Timeout | undefined;

  /** Tries `release` again until it succeeds or `leaseMs` have passed; `token` names what it releases. */
  add(token: string, release: () => Promise<unknown>, leaseMs: number): void {
    if (this.pending.size >= maxPending) return;
    this.pending.set(token, { release, until: Date.now() + leaseMs });
    this.schedule();
  }

  private schedule(): void {
    if (this.timer !== undefined || this.pending.size === 0) return;
    this.timer = setTimeout(() => {
      void this.retry().finally(() => {
        this.timer = undefined;
        this.schedule();
      });
    }, retryEveryMs);
    this.timer.unref();
  }

  /** Makes the pending releases, oldest first, until one fails: the database is still away. */
  private async retry(): Promise<void> {
    for (const [token, pending] of this.pending) {
      if (Date.now() < pending.until) {
        try {
          await pending.release();
        } catch {
          return;
        }
      }
      this.pending.delete(token);
    }
  }
}
