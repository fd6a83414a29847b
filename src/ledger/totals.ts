import type { DataSource } from "typeorm";

/*
 * The running totals a balance and a report read instead of every balance transaction
 * (docs/ledger.md, "Reading a balance fast"): per merchant, environment, currency, type, hour of
 * creation and hour of availability, the count and the sums of amount, fee and net. The statement
 * that writes transactions appends one signed delta per key (ledger/entries.ts) rather than update
 * one row, so that concurrent payments of one merchant never queue behind each other's row lock; the
 * job runner merges the deltas, so a merchant's totals are a row per hour of history plus a few
 * seconds of deltas.
 */

/** How often each instance merges the deltas. */
export const balanceTotalsMergeIntervalMs = 2_000;

/** Identifies the transaction lock of a merge ("bltt" in ASCII), so instances do not merge the same deltas at once. */
const mergeLockClass = 0x626c7474;

/**
 * Merges each key's deltas into one row, in one transaction, so a reader sees either the deltas or
 * their sum; then vacuums the table, which churns by design. A key's row is kept even when its sums
 * are zero: its currency has transactions, so the balance shows it. Returns how many rows were merged.
 */
export async function mergeBalanceTotals(dataSource: DataSource): Promise<number> {
  const merged = await dataSource.transaction(async (em) => {
    const [{ mine }] = (await em.query("SELECT pg_try_advisory_xact_lock($1, 0) AS mine", [mergeLockClass])) as [{ mine: boolean }];
    if (!mine) return 0;
    const [{ rows }] = (await em.query(
      `WITH taken AS (
         DELETE FROM balance_totals AS t
          USING (SELECT merchant_id, livemode, currency, type, created_hour, available_hour FROM balance_totals
                  GROUP BY 1, 2, 3, 4, 5, 6 HAVING count(*) > 1) AS g
          WHERE t.merchant_id = g.merchant_id AND t.livemode = g.livemode AND t.currency = g.currency AND t.type = g.type
            AND t.created_hour = g.created_hour AND t.available_hour = g.available_hour
         RETURNING t.*
       ), summed AS (
         INSERT INTO balance_totals (merchant_id, livemode, currency, type, created_hour, available_hour, count, amount, fee, net)
         SELECT merchant_id, livemode, currency, type, created_hour, available_hour, sum(count), sum(amount), sum(fee), sum(net)
           FROM taken GROUP BY 1, 2, 3, 4, 5, 6
       )
       SELECT count(*)::int AS rows FROM taken`,
    )) as [{ rows: number }];
    return rows;
  });
  if (merged > 0) await dataSource.query("VACUUM (SKIP_LOCKED) balance_totals");
  return merged;
}
