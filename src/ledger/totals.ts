import type { DataSource } from "typeorm";
import { mergeDeltas } from "../db/deltas.js";

/*
 * The running totals a balance and a report read instead of every balance transaction
 * (docs/ledger.md, "Reading a balance fast"): per merchant, environment, currency, type, bucket of
 * creation and hour of availability, the count and the sums of amount, fee and net. The statement
 * that writes transactions appends one signed delta per key with an hour's bucket (ledger/entries.ts)
 * rather than update one row, so that concurrent payments of one merchant never queue behind each
 * other's row lock. The job runner merges the deltas, and folds the hours of settled history into
 * days (`span_hours` 24), so that a merchant's totals are a row per day of history, per hour of its
 * last days and of what is still pending, and a few seconds of deltas.
 */

/** How often each instance merges the deltas and folds settled hours. */
export const balanceTotalsMergeIntervalMs = 2_000;

/**
 * How long an hour of history stays an hour's row once it is settled: a report of the last days
 * keeps hourly edges without reading transactions one by one, and every instance's clock is well past
 * a folded hour (a folded row counts as available).
 */
const foldAfterMs = 2 * 24 * 3_600_000;

/** Identifies the transaction lock of a merge ("bltt" in ASCII), so instances do not merge the same deltas at once. */
const mergeLockClass = 0x626c7474;

/**
 * In one transaction, so that a reader sees the rows before or after, never between: merges the
 * deltas into their keys' rows and their balances' all-time nets (`balance_accounts`; db/deltas.ts);
 * then, when the start of the day `foldAfterMs` before `now` (the service's clock) has passed the
 * fold's mark (`balance_folds.through`, which tells a report where days end and hours begin), moves
 * the mark there and folds every merged hour's row created and available before it into its day's
 * row. New transactions are created at the service's present, after the mark, so a day is folded
 * once, when the mark passes it. A key's row is kept even when its sums are zero: its currency has
 * transactions, so the balance shows it. Then vacuums the table, which churns by design. Returns how
 * many rows were merged or folded.
 */
export async function mergeBalanceTotals(dataSource: DataSource, now: Date): Promise<number> {
  const changed = await dataSource.transaction(async (em) => {
    const [{ mine }] = (await em.query("SELECT pg_try_advisory_xact_lock($1, 0) AS mine", [mergeLockClass])) as [{ mine: boolean }];
    if (!mine) return 0;
    const merged = await mergeDeltas(
      em,
      "balance_totals",
      ["merchant_id", "livemode", "currency", "type", "created_hour", "available_hour", "span_hours"],
      ["count", "amount", "fee", "net"],
      { table: "balance_accounts", keyColumns: ["merchant_id", "livemode", "currency"], sumColumns: ["net"] },
    );
    const [moved, movedCount] = (await em.query(
      `UPDATE balance_folds SET through = date_trunc('day', $1::timestamptz, 'UTC')
        WHERE through < date_trunc('day', $1::timestamptz, 'UTC') RETURNING through`,
      [new Date(now.getTime() - foldAfterMs)],
    )) as [{ through: Date }[], number];
    if (movedCount === 0) return merged;
    const [{ folded }] = (await em.query(
      `WITH taken AS (
         DELETE FROM balance_totals WHERE merged AND span_hours = 1 AND created_hour < $1 AND available_hour < $1 RETURNING *
       ), summed AS (
         INSERT INTO balance_totals (merchant_id, livemode, currency, type, created_hour, available_hour, span_hours, count, amount, fee, net, merged)
         SELECT merchant_id, livemode, currency, type, date_trunc('day', created_hour, 'UTC'), date_trunc('day', created_hour, 'UTC'), 24,
                sum(count), sum(amount), sum(fee), sum(net), true
           FROM taken GROUP BY 1, 2, 3, 4, 5
         ON CONFLICT (merchant_id, livemode, currency, type, created_hour, available_hour, span_hours) WHERE merged
         DO UPDATE SET count = balance_totals.count + excluded.count, amount = balance_totals.amount + excluded.amount,
                       fee = balance_totals.fee + excluded.fee, net = balance_totals.net + excluded.net
       )
       SELECT count(*)::int AS folded FROM taken`,
      [moved[0]!.through],
    )) as [{ folded: number }];
    return merged + folded;
  });
  if (changed > 0) await dataSource.query("VACUUM (SKIP_LOCKED) balance_totals");
  return changed;
}
