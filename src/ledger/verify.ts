import type { DataSource } from "typeorm";

/*
 * `npm run ledger:verify`'s check (decisions §11): every balance recomputed three ways — from the
 * payments, refunds, disputes and payouts themselves, from the balance transactions, from the ledger
 * lines — and from the running totals a balance is read from. The movements of money are derived
 * here from the objects again, independently of the resources' own rules (ledger/entries.ts), so
 * that a rule written wrong in one place shows as a difference rather than agreeing with itself.
 */

/** One thing that does not add up, in words an operator can act on. */
export interface LedgerDifference {
  readonly merchantId: string;
  readonly livemode: boolean;
  /** What was checked: a source object, a balance transaction, a total, a balance. */
  readonly subject: string;
  readonly detail: string;
}

/** What the verification found. */
export interface LedgerVerification {
  readonly transactions: number;
  readonly balances: number;
  readonly differences: readonly LedgerDifference[];
}

/** Every movement of money the objects imply, by decisions §11's table. */
const impliedSql = `
  SELECT merchant_id, livemode, payment_id AS source_id, 'payment' AS type, amount_received AS amount, currency
    FROM payments WHERE status = 'succeeded' AND amount_received > 0
  UNION ALL SELECT merchant_id, livemode, refund_id, 'refund', -amount, currency FROM refunds WHERE status = 'succeeded'
  UNION ALL SELECT merchant_id, livemode, dispute_id, 'dispute', -amount, currency FROM disputes
  UNION ALL SELECT merchant_id, livemode, dispute_id, 'dispute_reversal', amount, currency FROM disputes WHERE status = 'won'
  UNION ALL SELECT merchant_id, livemode, payout_id, 'payout', -amount, currency FROM payouts
  UNION ALL SELECT merchant_id, livemode, payout_id, 'payout_reversal', amount, currency FROM payouts WHERE status IN ('failed', 'cancelled')`;

/** The checks, each answering `(merchant_id, livemode, subject, detail)` per difference. */
const checks: readonly string[] = [
  // Each movement the objects imply is one balance transaction of its amount, and nothing else is.
  `WITH implied AS (${impliedSql})
   SELECT coalesce(i.merchant_id, t.merchant_id) AS merchant_id, coalesce(i.livemode, t.livemode) AS livemode,
          coalesce(i.type, t.type) || ' of ' || coalesce(i.source_id, t.source_id) AS subject,
          CASE WHEN t.balance_transaction_id IS NULL THEN 'implied (' || i.amount || ' ' || i.currency || ') but no balance transaction'
               WHEN i.source_id IS NULL THEN 'balance transaction ' || t.balance_transaction_id || ' (' || t.amount || ' ' || t.currency || ') implied by nothing'
               ELSE 'balance transaction ' || t.balance_transaction_id || ' moves ' || t.amount || ' ' || t.currency || ', implied ' || i.amount || ' ' || i.currency END AS detail
     FROM implied AS i FULL JOIN balance_transactions AS t
       ON t.merchant_id = i.merchant_id AND t.livemode = i.livemode AND t.source_id = i.source_id AND t.type = i.type
    WHERE t.balance_transaction_id IS NULL OR i.source_id IS NULL OR t.amount <> i.amount OR t.currency <> i.currency`,
  // Each transaction is two or more lines summing to zero: the balance's line its net, the fees' its fee.
  `SELECT t.merchant_id, t.livemode, 'balance transaction ' || t.balance_transaction_id AS subject,
          l.count || ' lines summing to ' || coalesce(l.sum, 0) || ', merchant_balance ' || coalesce(l.merchant_balance, 0) || ' for net ' || t.net
          || ', fees ' || coalesce(l.fees, 0) || ' for fee ' || t.fee AS detail
     FROM balance_transactions AS t
     CROSS JOIN LATERAL (SELECT count(*) AS count, sum(amount) AS sum, sum(amount) FILTER (WHERE account = 'merchant_balance') AS merchant_balance,
                                sum(amount) FILTER (WHERE account = 'fees') AS fees
                           FROM unnest(t.line_accounts, t.line_amounts) AS line (account, amount)) AS l
    WHERE l.count < 2 OR coalesce(l.sum, 0) <> 0 OR coalesce(l.merchant_balance, 0) <> t.net OR coalesce(l.fees, 0) <> t.fee`,
  // A won dispute gives back exactly the fee its opening took.
  `SELECT r.merchant_id, r.livemode, 'dispute_reversal of ' || r.source_id AS subject,
          'gives back a fee of ' || -r.fee || ', the dispute took ' || coalesce(d.fee::text, 'none') AS detail
     FROM balance_transactions AS r
     LEFT JOIN balance_transactions AS d ON d.merchant_id = r.merchant_id AND d.livemode = r.livemode AND d.source_id = r.source_id AND d.type = 'dispute'
    WHERE r.type = 'dispute_reversal' AND -r.fee IS DISTINCT FROM d.fee`,
  // The running totals are the transactions': day by day of creation (an hour's row lies within its
  // day, and a folded day is one row), and hour by hour of availability from the fold's mark on,
  // where every row is still an hour's (a balance's pending part is read there).
  `WITH kept AS (
     SELECT merchant_id, livemode, currency, type, date_trunc('day', created_hour, 'UTC') AS day,
            sum(count) AS count, sum(amount) AS amount, sum(fee) AS fee, sum(net) AS net
       FROM balance_totals GROUP BY 1, 2, 3, 4, 5
   ), recomputed AS (
     SELECT merchant_id, livemode, currency, type, date_trunc('day', created, 'UTC') AS day, count(*) AS count, sum(amount) AS amount,
            sum(fee) AS fee, sum(net) AS net
       FROM balance_transactions GROUP BY 1, 2, 3, 4, 5
   )
   SELECT coalesce(k.merchant_id, r.merchant_id) AS merchant_id, coalesce(k.livemode, r.livemode) AS livemode,
          'totals of ' || coalesce(k.type, r.type) || ' in ' || coalesce(k.currency, r.currency) || ' created on '
          || to_char(coalesce(k.day, r.day) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS subject,
          'kept count ' || coalesce(k.count, 0) || ', net ' || coalesce(k.net, 0) || '; transactions count ' || coalesce(r.count, 0) || ', net ' || coalesce(r.net, 0) AS detail
     FROM kept AS k FULL JOIN recomputed AS r
       ON k.merchant_id = r.merchant_id AND k.livemode = r.livemode AND k.currency = r.currency AND k.type = r.type AND k.day = r.day
    WHERE (k.count, k.amount, k.fee, k.net) IS DISTINCT FROM (r.count, r.amount, r.fee, r.net)`,
  `WITH kept AS (
     SELECT merchant_id, livemode, currency, available_hour AS hour, sum(net) AS net
       FROM balance_totals, balance_folds WHERE available_hour >= through GROUP BY 1, 2, 3, 4
   ), recomputed AS (
     SELECT merchant_id, livemode, currency, date_trunc('hour', available_on, 'UTC') AS hour, sum(net) AS net
       FROM balance_transactions, balance_folds WHERE date_trunc('hour', available_on, 'UTC') >= through GROUP BY 1, 2, 3, 4
   )
   SELECT coalesce(k.merchant_id, r.merchant_id) AS merchant_id, coalesce(k.livemode, r.livemode) AS livemode,
          'totals in ' || coalesce(k.currency, r.currency) || ' available at ' || to_char(coalesce(k.hour, r.hour) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:00') AS subject,
          'kept net ' || coalesce(k.net, 0) || '; transactions net ' || coalesce(r.net, 0) AS detail
     FROM kept AS k FULL JOIN recomputed AS r
       ON k.merchant_id = r.merchant_id AND k.livemode = r.livemode AND k.currency = r.currency AND k.hour = r.hour
    WHERE k.net IS DISTINCT FROM r.net`,
  // A folded row is a whole day before the fold's mark, available by then.
  `SELECT merchant_id, livemode, 'totals of ' || type || ' in ' || currency || ' created ' || created_hour AS subject,
          'a day''s row that is not a settled day before the fold''s mark ' || through AS detail
     FROM balance_totals, balance_folds
    WHERE span_hours = 24 AND (created_hour <> date_trunc('day', created_hour, 'UTC') OR created_hour + interval '1 day' > through
          OR available_hour >= through)`,
];

/**
 * Each balance per merchant, environment and currency, four ways: what the objects imply less the
 * fees charged, the transactions' net, the merchant_balance lines, and the running totals as a
 * balance reads them (its account and the deltas not merged yet).
 */
const balancesSql = `
  WITH implied AS (SELECT merchant_id, livemode, currency, sum(amount) AS amount FROM (${impliedSql}) AS i GROUP BY 1, 2, 3),
  charged AS (SELECT merchant_id, livemode, currency, sum(fee) AS fee, sum(net) AS net, count(*) AS n FROM balance_transactions GROUP BY 1, 2, 3),
  lined AS (SELECT merchant_id, livemode, currency, sum(amount) AS net FROM ledger_lines WHERE account = 'merchant_balance' GROUP BY 1, 2, 3),
  kept AS (SELECT merchant_id, livemode, currency, sum(net) AS net
             FROM (SELECT merchant_id, livemode, currency, net FROM balance_accounts
                   UNION ALL SELECT merchant_id, livemode, currency, net FROM balance_totals WHERE NOT merged) AS k GROUP BY 1, 2, 3)
  SELECT merchant_id, livemode, currency, (coalesce(i.amount, 0) - coalesce(c.fee, 0))::text AS from_objects, coalesce(c.net, 0)::text AS from_transactions,
         coalesce(l.net, 0)::text AS from_lines, coalesce(k.net, 0)::text AS from_totals, coalesce(c.n, 0)::int AS transactions
    FROM implied AS i FULL JOIN charged AS c USING (merchant_id, livemode, currency)
    FULL JOIN lined AS l USING (merchant_id, livemode, currency) FULL JOIN kept AS k USING (merchant_id, livemode, currency)`;

/**
 * Recomputes every balance and checks every entry; run while instances write, it reads one snapshot
 * (its statements scan the whole history: give `dataSource` a statement timeout to match).
 */
export async function verifyLedger(dataSource: DataSource): Promise<LedgerVerification> {
  return dataSource.transaction("REPEATABLE READ", async (em) => {
    const differences: LedgerDifference[] = [];
    for (const check of checks) {
      const rows = (await em.query(check)) as { merchant_id: string; livemode: boolean; subject: string; detail: string }[];
      differences.push(
        ...rows.map((row) => ({ merchantId: row.merchant_id, livemode: row.livemode, subject: row.subject, detail: row.detail })),
      );
    }
    const balances = (await em.query(balancesSql)) as {
      merchant_id: string;
      livemode: boolean;
      currency: string;
      from_objects: string;
      from_transactions: string;
      from_lines: string;
      from_totals: string;
      transactions: number;
    }[];
    for (const b of balances) {
      if (new Set([b.from_objects, b.from_transactions, b.from_lines, b.from_totals]).size === 1) continue;
      differences.push({
        merchantId: b.merchant_id,
        livemode: b.livemode,
        subject: `balance in ${b.currency}`,
        detail: `objects imply ${b.from_objects}, transactions ${b.from_transactions}, ledger lines ${b.from_lines}, running totals ${b.from_totals}`,
      });
    }
    return { transactions: balances.reduce((n, b) => n + b.transactions, 0), balances: balances.length, differences };
  });
}
