import type { DataSource } from "typeorm";
import type { Scope } from "../db/resource.js";
import { preparedQuery } from "../db/prepared.js";

/*
 * A merchant's exact number of payments, per environment and status, read without walking them
 * (docs/architecture.md, "Counting payments"). Triggers on `payments` append a signed delta to
 * `payment_counts` in the transaction of every insert and status change (migration
 * 1765400000000), so a count is the sum of a handful of rows and is exactly as current as the
 * payments a reader's snapshot sees. The job runner merges each status's deltas into one row.
 */

/** How often each instance merges the deltas: often enough that a count sums tens of rows, not thousands. */
export const paymentCountsMergeIntervalMs = 2_000;

/**
 * Identifies the transaction lock of a merge ("pcnt" in ASCII), so instances do not merge the same
 * deltas at once: harmless (a delta another merge took is skipped), but wasted.
 */
const mergeLockClass = 0x70636e74;

/** The scope's payments, of one status when `status` is given: exact, as of the statement's snapshot. */
export async function countPayments(dataSource: DataSource, scope: Scope, status: string | undefined): Promise<number> {
  const [row] =
    status === undefined
      ? await preparedQuery<{ n: string }>(
          dataSource,
          "SELECT coalesce(sum(n), 0)::text AS n FROM payment_counts WHERE merchant_id = $1 AND livemode = $2",
          [scope.merchantId, scope.livemode],
        )
      : await preparedQuery<{ n: string }>(
          dataSource,
          "SELECT coalesce(sum(n), 0)::text AS n FROM payment_counts WHERE merchant_id = $1 AND livemode = $2 AND status = $3",
          [scope.merchantId, scope.livemode, status],
        );
  return Number(row!.n);
}

/**
 * Merges every status's deltas into one row, in one transaction, so a reader sees either the deltas
 * or their sum; then vacuums the table, which churns by design and must not wait for autovacuum
 * (off on some hosts). Returns how many rows were merged.
 */
export async function mergePaymentCounts(dataSource: DataSource): Promise<number> {
  const merged = await dataSource.transaction(async (em) => {
    const [{ mine }] = (await em.query("SELECT pg_try_advisory_xact_lock($1, 0) AS mine", [mergeLockClass])) as [{ mine: boolean }];
    if (!mine) return 0;
    const [{ rows }] = (await em.query(
      `WITH taken AS (
         DELETE FROM payment_counts AS c
          USING (SELECT merchant_id, livemode, status FROM payment_counts GROUP BY 1, 2, 3 HAVING count(*) > 1) AS g
          WHERE c.merchant_id = g.merchant_id AND c.livemode = g.livemode AND c.status = g.status
         RETURNING c.merchant_id, c.livemode, c.status, c.n
       ), summed AS (
         INSERT INTO payment_counts (merchant_id, livemode, status, n)
         SELECT merchant_id, livemode, status, sum(n) FROM taken GROUP BY 1, 2, 3 HAVING sum(n) <> 0
       )
       SELECT count(*)::int AS rows FROM taken`,
    )) as [{ rows: number }];
    return rows;
  });
  if (merged > 0) await dataSource.query("VACUUM payment_counts");
  return merged;
}

/**
 * Counts every payment afresh: for a load that bypassed the triggers (`bench:seed` loads with
 * `session_replication_role = replica`). Writers wait for it.
 */
export async function recountPayments(dataSource: DataSource): Promise<void> {
  await dataSource.transaction(async (em) => {
    await em.query("LOCK TABLE payments IN SHARE MODE");
    await em.query("DELETE FROM payment_counts");
    await em.query(
      "INSERT INTO payment_counts (merchant_id, livemode, status, n) SELECT merchant_id, livemode, status, count(*) FROM payments GROUP BY 1, 2, 3",
    );
  });
}
