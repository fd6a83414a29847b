import type { DataSource } from "typeorm";
import { mergeDeltas } from "./deltas.js";
import type { Scope } from "./scope.js";

/*
 * A merchant's exact number of payments per environment and status, and of events per environment
 * and type, read without walking them (docs/architecture.md, "Counting lists"). Triggers on
 * `payments` and `events` append a signed delta to `list_counts` in the transaction of every insert,
 * delete and status change (migrations 1765400000000, 1766600000000), so a count is the sum of a
 * handful of rows and is exactly as current as the objects a reader's snapshot sees. The job runner
 * merges the deltas.
 */

/** The lists whose counts are kept, each with the table it counts and the column it counts by. */
const keptLists = {
  payments: { table: "payments", key: "status" },
  events: { table: "events", key: "type" },
} as const;

/** A list whose `total_count` is kept rather than counted, when filtered by its key alone or not at all. */
export type KeptList = keyof typeof keptLists;

/** How often each instance merges the deltas: often enough that a count sums tens of rows, not thousands. */
export const listCountsMergeIntervalMs = 2_000;

/**
 * Identifies the transaction lock of a merge ("cnts" in ASCII), so instances do not merge the same
 * deltas at once: harmless (a delta another merge took is skipped), but wasted.
 */
const mergeLockClass = 0x636e7473;

/** Which kept count a list reads: the scope's objects of `list`, of one `key` (a payment's status, an event's type) when given. */
export interface KeptCount {
  readonly list: KeptList;
  readonly scope: Scope;
  readonly key: string | undefined;
}

/**
 * The statement that sums a kept count (as `total`), exact as of the statement's snapshot, with its
 * parameters numbered from `$first`: a list reads it in the statement of its page (src/db/list-query.ts).
 */
export function keptCountQuery(count: KeptCount, first: number): { text: string; values: unknown[] } {
  const values: unknown[] = [count.list, count.scope.merchantId, count.scope.livemode];
  if (count.key !== undefined) values.push(count.key);
  const byKey = count.key === undefined ? "" : ` AND key = $${first + 3}`;
  return {
    text: `SELECT coalesce(sum(n), 0) AS total FROM list_counts WHERE list = $${first} AND merchant_id = $${first + 1} AND livemode = $${first + 2}${byKey}`,
    values,
  };
}

/**
 * Merges each count's deltas into its one row, in one transaction, so a reader sees either the deltas
 * or their sum; then vacuums the table, which churns by design and must not wait for autovacuum
 * (off on some hosts). Returns how many rows were merged. The vacuum skips the table while another
 * vacuum (another instance's, autovacuum's) holds it: waiting would only end in the pool's
 * lock_timeout, an error for a table that is being vacuumed anyway.
 */
export async function mergeListCounts(dataSource: DataSource): Promise<number> {
  const merged = await dataSource.transaction(async (em) => {
    const [{ mine }] = (await em.query("SELECT pg_try_advisory_xact_lock($1, 0) AS mine", [mergeLockClass])) as [{ mine: boolean }];
    if (!mine) return 0;
    return mergeDeltas(em, "list_counts", ["list", "merchant_id", "livemode", "key"], ["n"]);
  });
  if (merged > 0) await dataSource.query("VACUUM (SKIP_LOCKED) list_counts");
  return merged;
}

/**
 * Counts every kept list afresh: for a load that bypassed the triggers (`bench:seed` loads with
 * `session_replication_role = replica`). Writers wait for it.
 */
export async function recountLists(dataSource: DataSource): Promise<void> {
  await dataSource.transaction(async (em) => {
    await em.query("LOCK TABLE payments, events IN SHARE MODE");
    await em.query("DELETE FROM list_counts");
    for (const [list, { table, key }] of Object.entries(keptLists)) {
      await em.query(
        `INSERT INTO list_counts (list, merchant_id, livemode, key, n) SELECT $1, merchant_id, livemode, ${key}, count(*) FROM ${table} GROUP BY 2, 3, 4`,
        [list],
      );
    }
  });
}
