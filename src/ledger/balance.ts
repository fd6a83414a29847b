import type { EntityManager } from "typeorm";
import type { Scope } from "../db/scope.js";
import { preparedIn } from "../db/prepared.js";

/** One currency of a balance, in the smallest unit. */
export interface CurrencyBalance {
  readonly currency: string;
  readonly available: bigint;
  readonly pending: bigint;
}

/**
 * The balance from the running totals (ledger/totals.ts), exact as of the statement's snapshot: every
 * hour of availability after the current one is pending; within the current hour, the transactions
 * not yet available are read one by one (an hour of a merchant's captures at most). Everything else
 * is available.
 */
const balanceSql = `
  WITH totals AS (
    SELECT currency, sum(net) AS total, coalesce(sum(net) FILTER (WHERE available_hour > date_trunc('hour', $3::timestamptz, 'UTC')), 0) AS later
      FROM balance_totals WHERE merchant_id = $1 AND livemode = $2 GROUP BY currency
  ), this_hour AS (
    SELECT currency, sum(net) AS pending FROM balance_transactions
     WHERE merchant_id = $1 AND livemode = $2 AND available_on > $3::timestamptz
       AND available_on < date_trunc('hour', $3::timestamptz, 'UTC') + interval '1 hour'
     GROUP BY currency
  )
  SELECT currency, total::text, (later + coalesce(this_hour.pending, 0))::text AS pending
    FROM totals LEFT JOIN this_hour USING (currency) ORDER BY currency`;

/** The scope's balance per currency with any transaction at `now` on the service's clock, in currency order. */
export async function readBalance(em: EntityManager, scope: Scope, now: Date): Promise<CurrencyBalance[]> {
  const rows = await preparedIn<{ currency: string; total: string; pending: string }>(em, balanceSql, [
    scope.merchantId,
    scope.livemode,
    now,
  ]);
  return rows.map((row) => {
    const pending = BigInt(row.pending);
    return { currency: row.currency, available: BigInt(row.total) - pending, pending };
  });
}
