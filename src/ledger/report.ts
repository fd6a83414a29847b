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
 * What a report sums, per currency and type: everything created `before` the period begins and
 * before it ends (`to`); the period's activity is the difference, the balances their nets. Each sum
 * is the running totals' rows (ledger/totals.ts) that end by the bucket boundary at or before the
 * time, and the transactions created from that boundary to the time, read one by one: the boundary
 * is the hour's start for a time after the totals' fold mark, the day's start before it, where the
 * rows are days. No row straddles such a boundary (an hour's row lies within its day), so each
 * transaction is counted once, and a month's report sums a few hundred rows whatever the month held.
 * The totals and the transactions are written by one statement, and read here in one snapshot.
 */
const reportSql = `
  WITH bound AS (
    SELECT CASE WHEN $3::timestamptz < through THEN date_trunc('day', $3::timestamptz, 'UTC') ELSE date_trunc('hour', $3::timestamptz, 'UTC') END AS start,
           CASE WHEN $4::timestamptz < through THEN date_trunc('day', $4::timestamptz, 'UTC') ELSE date_trunc('hour', $4::timestamptz, 'UTC') END AS finish
      FROM balance_folds
  ), summed AS (
    ${["start", "finish"]
      .map((end) => {
        const part = end === "start" ? "before" : "to";
        const at = end === "start" ? "$3::timestamptz" : "$4::timestamptz";
        // The boundary as a scalar subquery: a value the index on created ranges over, not a join.
        return (
          `SELECT '${part}' AS part, currency, type, count, amount, fee, net FROM balance_totals WHERE merchant_id = $1 AND livemode = $2 ` +
          `AND created_hour + make_interval(hours => span_hours) <= (SELECT ${end} FROM bound)\n    UNION ALL\n    ` +
          `SELECT '${part}', currency, type, 1, amount, fee, net FROM balance_transactions WHERE merchant_id = $1 AND livemode = $2 ` +
          `AND created >= (SELECT ${end} FROM bound) AND created < ${at}`
        );
      })
      .join("\n    UNION ALL\n    ")}
  )
  SELECT part, currency, type, sum(count)::text AS count, sum(amount)::text AS amount, sum(fee)::text AS fee, sum(net)::text AS net
    FROM summed WHERE $5::bpchar IS NULL OR currency = $5::bpchar GROUP BY 1, 2, 3`;

/** The scope's balance report for [from, to), of one currency when given, in currency order. */
export async function balanceReport(
  dataSource: DataSource,
  scope: Scope,
  period: { from: Date; to: Date; currency: string | undefined },
): Promise<CurrencyReport[]> {
  type Sums = Record<"count" | "amount" | "fee" | "net", string>;
  const rows = await preparedQuery<{ part: "before" | "to"; currency: string; type: BalanceTransactionTypeWord } & Sums>(
    dataSource,
    reportSql,
    [scope.merchantId, scope.livemode, period.from, period.to, period.currency ?? null],
  );
  const currencies = [...new Set(rows.map((row) => row.currency))].sort();
  return currencies.map((currency) => {
    const sumsOf = (part: "before" | "to", type: BalanceTransactionTypeWord) => {
      const row = rows.find((r) => r.part === part && r.currency === currency && r.type === type);
      return { count: BigInt(row?.count ?? 0), amount: BigInt(row?.amount ?? 0), fee: BigInt(row?.fee ?? 0), net: BigInt(row?.net ?? 0) };
    };
    const openingBalance = typeOrder.reduce((sum, type) => sum + sumsOf("before", type).net, 0n);
    const activity = typeOrder.flatMap((type) => {
      const [before, by] = [sumsOf("before", type), sumsOf("to", type)];
      const count = by.count - before.count;
      return count === 0n ? [] : [{ type, count, amount: by.amount - before.amount, fee: by.fee - before.fee, net: by.net - before.net }];
    });
    const closingBalance = activity.reduce((sum, line) => sum + line.net, openingBalance);
    return { currency, openingBalance, activity, closingBalance };
  });
}
