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
 * In one transaction, so that a reader sees the rows before or after, never between: merges each
 * key's deltas into one row, then folds every hour's row created and available before the start of
 * the day `foldAfterMs` before `now` (the service's clock) into its day's row, and moves the fold's
 * mark (`balance_folds.through`) there, which tells a report where days end and hours begin. A key's
 * row is kept even when its sums are zero: its currency has transactions, so the balance shows it.
 * Then vacuums the table, which churns by design. Returns how many rows were merged or folded.
 */
export async function mergeBalanceTotals(dataSource: DataSource, now: Date): Promise<number> {
  const changed = await dataSource.transaction(async (em) => {
    const [{ mine }] = (await em.query("SELECT pg_try_advisory_xact_lock($1, 0) AS mine", [mergeLockClass])) as [{ mine: boolean }];
    if (!mine) return 0;
    const [{ folded }] = (await em.query(
      `WITH mark AS (
         UPDATE balance_folds SET through = greatest(through, date_trunc('day', $1::timestamptz, 'UTC')) RETURNING through
       ), taken AS (
         DELETE FROM balance_totals AS t USING mark
          WHERE t.span_hours = 1 AND t.created_hour < mark.through AND t.available_hour < mark.through
         RETURNING t.*
       ), summed AS (
         INSERT INTO balance_totals (merchant_id, livemode, currency, type, created_hour, available_hour, span_hours, count, amount, fee, net)
         SELECT merchant_id, livemode, currency, type, date_trunc('day', created_hour, 'UTC'), date_trunc('day', created_hour, 'UTC'), 24,
                sum(count), sum(amount), sum(fee), sum(net)
           FROM taken GROUP BY 1, 2, 3, 4, 5
       )
       SELECT count(*)::int AS folded FROM taken`,
      [new Date(now.getTime() - foldAfterMs)],
    )) as [{ folded: number }];
    const merged = await mergeDeltas(
      em,
      "balance_totals",
      ["merchant_id", "livemode", "currency", "type", "created_hour", "available_hour", "span_hours"],
      ["count", "amount", "fee", "net"],
    );
    return folded + merged;
  });
  if (changed > 0) await dataSource.query("VACUUM (SKIP_LOCKED) balance_totals");
  return changed;
}
