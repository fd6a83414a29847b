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
 * The balance from the running totals (ledger/totals.ts), exact as of the statement's snapshot: the
 * all-time net is each currency's account (`balance_accounts`, what the merges added up) and the
 * deltas not merged yet; every hour of availability after the current one is pending; within the
 * current hour, the transactions not yet available are read one by one (an hour of a merchant's
 * captures at most). Everything else is available. It reads a row per currency and per pending hour
 * and type, however long the history.
 */
const balanceSql = `
  WITH accounts AS (
    SELECT currency, net FROM balance_accounts WHERE merchant_id = $1 AND livemode = $2
  ), deltas AS (
    SELECT currency, sum(net) AS net FROM balance_totals WHERE merchant_id = $1 AND livemode = $2 AND NOT merged GROUP BY currency
  ), later AS (
    SELECT currency, sum(net) AS net FROM balance_totals
     WHERE merchant_id = $1 AND livemode = $2 AND available_hour > date_trunc('hour', $3::timestamptz, 'UTC') GROUP BY currency
  ), this_hour AS (
    SELECT currency, sum(net) AS pending FROM balance_transactions
     WHERE merchant_id = $1 AND livemode = $2 AND available_on > $3::timestamptz
       AND available_on < date_trunc('hour', $3::timestamptz, 'UTC') + interval '1 hour'
     GROUP BY currency
  )
  SELECT currency, (coalesce(a.net, 0) + coalesce(d.net, 0))::text AS total,
         (coalesce(l.net, 0) + coalesce(h.pending, 0))::text AS pending
    FROM accounts AS a FULL JOIN deltas AS d USING (currency) LEFT JOIN later AS l USING (currency) LEFT JOIN this_hour AS h USING (currency)
   ORDER BY currency`;

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
