import pg from "pg";

/*
 * Statements that calls make at about the same time go to PostgreSQL together: each statement costs
 * the database a wake-up, an execution and a commit, and this instance a round trip, whatever its
 * rows, so under load sharing them is what keeps either from being the bottleneck. Each call still
 * has its own answer, and only once its rows have committed.
 */

/** PostgreSQL rejected the statement, so (outside a transaction) it wrote nothing at all. */
export function rejectedByDatabase(error: unknown): boolean {
  return error instanceof pg.DatabaseError && error.severity === "ERROR";
}

/** Batches of one kind being written at once: more would only make each batch smaller. */
const concurrentBatches = 2;
/** Most items in one statement. */
const largestBatch = 200;

interface Waiting<Item, Result> {
  readonly item: Item;
  /** The key of the row the item writes: no batch holds two items of one key. None for a read. */
  readonly key: string | undefined;
  resolve(result: Result): void;
  reject(error: unknown): void;
}

/**
 * The items of one kind of statement waiting to be written, and the batches on their way. `write`
 * runs one statement for a batch and answers each item's result, in order.
 */
export class StatementBatches<Item, Result> {
  private waiting: Waiting<Item, Result>[] = [];
  private inFlight = 0;
  /** The keys of the batches on their way. */
  private readonly keysInFlight = new Set<string>();
  private scheduled = false;

  constructor(private readonly write: (batch: readonly Item[]) => Promise<Result[]>) {}

  /**
   * Writes `item` in the next batch that holds no other item of its row `key`; its result. A read
   * has no key: any number of reads of one row may share a batch, or be on their way at once.
   */
  add(item: Item, key?: string): Promise<Result> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ item, key, resolve, reject });
      this.schedule();
    });
  }

  /** Sends at the end of this event-loop turn, so that every call that reaches here in it shares the batch. */
  private schedule(): void {
    if (this.scheduled || this.inFlight >= concurrentBatches || this.waiting.length === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      while (this.inFlight < concurrentBatches) {
        const batch = this.nextBatch();
        if (batch.length === 0) return;
        void this.send(batch);
      }
    });
  }

  /**
   * The oldest waiting items, up to `largestBatch`, no two with one key and none with the key of a
   * batch on its way: an item whose row is already in a batch (two calls choosing one payment_id, two
   * claims on one payment) waits for a later one, and meets there what the first one did. So two
   * batches in flight never write one row, and cannot deadlock on each other's row locks. Reads,
   * which have no key, are never held back.
   */
  private nextBatch(): Waiting<Item, Result>[] {
    const keys = this.keysInFlight;
    const batch: Waiting<Item, Result>[] = [];
    const later: Waiting<Item, Result>[] = [];
    for (const waiting of this.waiting) {
      if (batch.length < largestBatch && (waiting.key === undefined || !keys.has(waiting.key))) {
        if (waiting.key !== undefined) keys.add(waiting.key);
        batch.push(waiting);
      } else {
        later.push(waiting);
      }
    }
    this.waiting = later;
    return batch;
  }

  private async send(batch: Waiting<Item, Result>[]): Promise<void> {
    this.inFlight++;
    try {
      const results = await this.write(batch.map((waiting) => waiting.item));
      for (const [i, waiting] of batch.entries()) waiting.resolve(results[i]!);
    } catch (error) {
      if (batch.length > 1 && rejectedByDatabase(error)) {
        // One item broke a rule of the database that no check before caught, and took the batch
        // with it: each alone gets its own answer, so only that item's call fails.
        await Promise.all(batch.map((waiting) => this.write([waiting.item]).then(([result]) => waiting.resolve(result!), waiting.reject)));
      } else {
        for (const waiting of batch) waiting.reject(error);
      }
    } finally {
      this.inFlight--;
      for (const waiting of batch) if (waiting.key !== undefined) this.keysInFlight.delete(waiting.key);
      this.schedule();
    }
  }
}
