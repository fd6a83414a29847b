import type { DataSource } from "typeorm";
import type { Scope } from "../db/scope.js";
import { preparedQuery } from "../db/prepared.js";
import type { BalanceTransactionTypeWord } from "./balance-transaction.entity.js";

/** The transactions of one type in a report's period. */
export interface ReportActivity {
  readonly type: BalanceTransactionTypeWord;
  readonly count: bigint;
  readonly amount: bigint;
  readonly fee: bigint;
  readonly net: bigint;
}

/** One currency of a balance report. */
export interface CurrencyReport {
  readonly currency: string;
  readonly openingBalance: bigint;
  readonly activity: readonly ReportActivity[];
  readonly closingBalance: bigint;
}

/** The order a report lists types in: the order of decisions §11's table. */
const typeOrder: readonly BalanceTransactionTypeWord[] = ["payment", "refund", "dispute", "dispute_reversal", "payout", "payout_reversal"];

/**
 * What a report sums, per currency and type: `before` the period (its opening balance) or `within`
 * it. Whole hours come from the running totals (ledger/totals.ts); the partial hours at either end
 * of the period are read transaction by transaction, so a month's report sums a few hundred rows
 * whatever the month held. Both from one snapshot: the totals and the transactions are written by
 * the same statement.
 */
const reportSql = `
  WITH bounds AS (
    SELECT date_trunc('hour', $3::timestamptz, 'UTC') AS from_floor,
           date_trunc('hour', $3::timestamptz + interval '1 hour' - interval '1 microsecond', 'UTC') AS from_ceil,
           date_trunc('hour', $4::timestamptz, 'UTC') AS to_floor
  ), part AS (
    SELECT 'before' AS part, currency, type, count, amount, fee, net FROM balance_totals, bounds
     WHERE merchant_id = $1 AND livemode = $2 AND created_hour < from_floor
    UNION ALL
    SELECT 'before', currency, type, 1, amount, fee, net FROM balance_transactions, bounds
     WHERE merchant_id = $1 AND livemode = $2 AND created >= from_floor AND created < $3::timestamptz
    UNION ALL
    SELECT 'within', currency, type, count, amount, fee, net FROM balance_totals, bounds
     WHERE merchant_id = $1 AND livemode = $2 AND created_hour >= from_ceil AND created_hour < to_floor
    UNION ALL
    SELECT 'within', currency, type, 1, amount, fee, net FROM balance_transactions, bounds
     WHERE merchant_id = $1 AND livemode = $2 AND created >= $3::timestamptz AND created < $4::timestamptz
       AND (created < from_ceil OR created >= greatest(to_floor, from_ceil))
  )
  SELECT part, currency, type, sum(count)::text AS count, sum(amount)::text AS amount, sum(fee)::text AS fee, sum(net)::text AS net
    FROM part WHERE $5::bpchar IS NULL OR currency = $5::bpchar GROUP BY 1, 2, 3`;

/** The scope's balance report for [from, to), of one currency when given, in currency order. */
export async function balanceReport(
  dataSource: DataSource,
  scope: Scope,
  period: { from: Date; to: Date; currency: string | undefined },
): Promise<CurrencyReport[]> {
  const rows = await preparedQuery<
    { part: "before" | "within"; currency: string; type: BalanceTransactionTypeWord } & Record<"count" | "amount" | "fee" | "net", string>
  >(dataSource, reportSql, [scope.merchantId, scope.livemode, period.from, period.to, period.currency ?? null]);
  const currencies = [...new Set(rows.map((row) => row.currency))].sort();
  return currencies.map((currency) => {
    const mine = rows.filter((row) => row.currency === currency);
    const openingBalance = mine.filter((row) => row.part === "before").reduce((sum, row) => sum + BigInt(row.net), 0n);
    const activity = mine
      .filter((row) => row.part === "within")
      .sort((a, b) => typeOrder.indexOf(a.type) - typeOrder.indexOf(b.type))
      .map((row) => ({ type: row.type, count: BigInt(row.count), amount: BigInt(row.amount), fee: BigInt(row.fee), net: BigInt(row.net) }));
    const closingBalance = activity.reduce((sum, line) => sum + line.net, openingBalance);
    return { currency, openingBalance, activity, closingBalance };
  });
}
