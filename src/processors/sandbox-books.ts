import type { DataSource } from "typeorm";
import { StatementBatches } from "../db/batches.js";
import { preparedQuery } from "../db/prepared.js";
import { randomBase62 } from "../ids.js";
import type { ProcessorAnswers } from "./processor.js";

/** A call the sandbox answered, as its books keep it. */
interface BookedCall {
  readonly idempotencyKey: string;
  readonly operation: keyof ProcessorAnswers | "recalled";
  readonly outcome: ProcessorAnswers[keyof ProcessorAnswers];
}

/** What the books answer a key recalled before any call with it arrived, and every later call with it. */
function abandoned(): ProcessorAnswers["authorize"] {
  return {
    status: "declined",
    reference: `sbx_${randomBase62(24)}`,
    errorCode: "attempt_abandoned",
    errorMessage: "This attempt was settled as never made before it reached the processor.",
  };
}

/**
 * The books of the simulated card networks: the first answer to every payment call, by idempotency
 * key, as a real processor keeps them. They live in the service's database only because the sandbox
 * has nowhere else to keep them; each call commits on its own, as an external system would, whatever
 * happens to the caller afterwards. The calls answered at about the same time are booked together,
 * in one statement (src/db/batches.ts), which commits without waiting for its WAL flush: the books
 * are the simulated processor's, not ours, and should PostgreSQL itself crash and lose their last
 * moments, recovery finds those calls never made and settles them so (a sandbox moves no money).
 * Our own records, the attempt before the call and the outcome after, are flushed as every write is.
 */
export class SandboxCallBooks {
  private readonly batches: StatementBatches<BookedCall, BookedCall>;

  constructor(private readonly dataSource: DataSource) {
    this.batches = new StatementBatches((calls) => this.bookAll(calls));
  }

  /** Books `outcome` for the call unless one with its key came first; the first call's answer. */
  async book<Operation extends keyof ProcessorAnswers>(
    operation: Operation,
    idempotencyKey: string,
    outcome: ProcessorAnswers[Operation],
  ): Promise<ProcessorAnswers[Operation]> {
    const first = await this.batches.add({ idempotencyKey, operation, outcome }, idempotencyKey);
    return first.outcome as ProcessorAnswers[Operation];
  }

  /** The first answer to the key; undefined when no call with it came, after which every call with it is refused. */
  async recall<Operation extends keyof ProcessorAnswers>(idempotencyKey: string): Promise<ProcessorAnswers[Operation] | undefined> {
    const [first] = await this.bookAll([{ idempotencyKey, operation: "recalled", outcome: abandoned() }]);
    return first!.operation === "recalled" ? undefined : (first!.outcome as ProcessorAnswers[Operation]);
  }

  /** Books calls (no two of one key) in one statement: for each, in order, the first call booked with its key. */
  private async bookAll(calls: readonly BookedCall[]): Promise<BookedCall[]> {
    const keys = calls.map((call) => call.idempotencyKey);
    const inserted = await preparedQuery<{ idempotency_key: string }>(
      this.dataSource,
      `INSERT INTO sandbox_processor_calls (idempotency_key, operation, outcome, created)
       SELECT key, operation, outcome, now() FROM unnest($1::varchar[], $2::varchar[], $3::jsonb[]) AS input(key, operation, outcome)
       CROSS JOIN (SELECT set_config('synchronous_commit', 'off', true)) AS commit_without_flush
       ON CONFLICT (idempotency_key) DO NOTHING RETURNING idempotency_key`,
      [keys, calls.map((call) => call.operation), calls.map((call) => JSON.stringify(call.outcome))],
    );
    const booked = new Set(inserted.map((row) => row.idempotency_key));
    const earlier = new Map<string, BookedCall>();
    if (booked.size < calls.length) {
      const rows = await preparedQuery<{ idempotency_key: string; operation: BookedCall["operation"]; outcome: BookedCall["outcome"] }>(
        this.dataSource,
        "SELECT idempotency_key, operation, outcome FROM sandbox_processor_calls WHERE idempotency_key = ANY ($1::varchar[])",
        [keys.filter((key) => !booked.has(key))],
      );
      for (const row of rows)
        earlier.set(row.idempotency_key, { idempotencyKey: row.idempotency_key, operation: row.operation, outcome: row.outcome });
    }
    return calls.map((call) => (booked.has(call.idempotencyKey) ? call : earlier.get(call.idempotencyKey)!));
  }
}

/**
 * How long the books keep a call: far longer than any attempt stays unsettled (its claim's lease is a
 * minute, recovery looks every second) or a retry of its API call can come (idempotency keys last 24
 * hours), so no recall or repeated call ever misses the first answer.
 */
export const sandboxBooksRetentionDays = 7;

/** Calls removed per statement: short statements, so reaping never holds many row locks for long. */
const reapBatch = 1000;

/**
 * Removes the calls booked more than `sandboxBooksRetentionDays` ago, by the database's clock, which
 * is the one that booked them (the service's may be a sandbox test clock moved ahead); instances
 * reaping at once skip each other's rows. How many went.
 */
export async function reapSandboxBooks(dataSource: DataSource): Promise<number> {
  let reaped = 0;
  for (;;) {
    const [, count] = (await dataSource.query(
      `DELETE FROM sandbox_processor_calls WHERE ctid = ANY (ARRAY(
         SELECT ctid FROM sandbox_processor_calls WHERE created < now() - interval '${sandboxBooksRetentionDays} days'
          LIMIT ${reapBatch} FOR UPDATE SKIP LOCKED))`,
    )) as [unknown, number];
    reaped += count;
    if (count < reapBatch) return reaped;
  }
}
