import type { Clock } from "../clock.js";
import { newId } from "../ids.js";
import type { BalanceTransactionTypeWord } from "./balance-transaction.entity.js";

/*
 * The ledger's part of the one statement that writes an object's change (objects/change.ts): the
 * balance transactions the change causes, their ledger lines and their running totals, written only
 * for a change that is written, so that money moves exactly when its cause commits. What is priced
 * from the profile (fees, the settlement delay) is read by the statement itself, from the profile as
 * it stands when the money moves.
 */

/**
 * A movement of money a change makes, as its resource says (decisions §11's table): `amount` signed,
 * credits positive. Its owner, currency and source are the changed object's own, which the
 * statement reads from the object's row.
 */
export interface Movement {
  readonly type: BalanceTransactionTypeWord;
  readonly amount: bigint;
}

/** A movement with what the statement writes it with: its id and its time on the service's clock. */
export interface LedgerEntry extends Movement {
  readonly balanceTransactionId: string;
  readonly created: Date;
}

/** The entry of `movement`, made now. */
export function entryOf(clock: Clock, movement: Movement): LedgerEntry {
  return { ...movement, balanceTransactionId: newId("txn"), created: clock.now() };
}

/** The account a transaction's `amount` comes from or goes to: the customer's funds, or the payout in transit for a payout. */
const counterparty = "CASE WHEN type LIKE 'payout%' THEN 'payout_clearing' ELSE 'customer_funds' END";

/**
 * The ledger lines of a row with `type`, `amount`, `fee` and `net`, as a balance transaction stores
 * them (migration 1766700000000): the merchant's balance moves by `net`, the fees by `fee`, the
 * counterparty by the opposite of `amount`, so they sum to zero; a line of zero is left out.
 * `amount` is never zero (an object's amount is at least 1), so `fee` and `net` are not both zero.
 * Exported for the benchmark's seed, which writes transactions in bulk.
 */
export const ledgerLinesSql = {
  accounts:
    `CASE WHEN fee = 0 THEN ARRAY['merchant_balance', ${counterparty}] WHEN net = 0 THEN ARRAY['fees', ${counterparty}] ` +
    `ELSE ARRAY['merchant_balance', 'fees', ${counterparty}] END`,
  amounts: "CASE WHEN fee = 0 THEN ARRAY[net, -amount] WHEN net = 0 THEN ARRAY[fee, -amount] ELSE ARRAY[net, fee, -amount] END",
};

/**
 * The CTEs writing the entries of the changes that `written` (a CTE of positions) wrote, from the
 * parameters `ledgerArrays` makes, numbered from `$first`. An entry's merchant, environment, profile
 * and currency are those of its object's row in `objects` (a CTE of the changed rows by position),
 * and its source is the object, whose id is `sourceColumn`.
 * - `priced`: each entry's fee and availability from its profile. A payment pays the profile's
 *   processing fee (basis points, rounded half-up) and is available after its settlement delay; a
 *   dispute pays the dispute fee and its reversal gives back the fee the dispute paid; everything
 *   else is fee-free and available at once. A priced entry whose profile is not its merchant's has
 *   no fee, which the table refuses: the whole change fails rather than move money unrecorded.
 * - `txn`: the balance transactions, each with its ledger lines (`ledgerLinesSql`); `total`: one
 *   delta per currency, type and hour of the running totals (ledger/totals.ts), summed from `priced`
 *   so that the insert need not return its rows.
 */
export function ledgerSql(first: number, written: string, objects: string, sourceColumn: string): string {
  const arrays = ["varchar", "varchar", "bigint", "timestamptz", "bigint"].map((type, i) => `$${first + i}::${type}[]`);
  return (
    `entry AS (SELECT e.balance_transaction_id, o.merchant_id, o.livemode, o.profile_id, e.type, e.amount, o.currency, ` +
    `o."${sourceColumn}" AS source_id, e.created FROM unnest(${arrays.join(", ")}) AS e(balance_transaction_id, type, amount, created, position) ` +
    `JOIN ${written} USING (position) JOIN ${objects} AS o USING (position)),\n` +
    `priced AS (SELECT e.*, CASE e.type WHEN 'payment' THEN (e.amount * p.processing_fee_bps + 5000) / 10000 WHEN 'dispute' THEN p.dispute_fee ` +
    `WHEN 'dispute_reversal' THEN -coalesce((SELECT d.fee FROM balance_transactions AS d WHERE d.merchant_id = e.merchant_id ` +
    `AND d.livemode = e.livemode AND d.source_id = e.source_id AND d.type = 'dispute'), 0) ELSE 0 END AS fee, ` +
    `e.created + CASE WHEN e.type = 'payment' THEN make_interval(days => p.settlement_delay_days) ELSE interval '0' END AS available_on ` +
    `FROM entry AS e LEFT JOIN profiles AS p ON p.profile_id = e.profile_id AND p.merchant_id = e.merchant_id),\n` +
    `txn AS (INSERT INTO balance_transactions (merchant_id, livemode, balance_transaction_id, profile_id, type, amount, fee, net, currency, ` +
    `source_id, available_on, created, line_accounts, line_amounts) SELECT merchant_id, livemode, balance_transaction_id, profile_id, type, ` +
    `amount, fee, net, currency, source_id, available_on, created, ${ledgerLinesSql.accounts}, ${ledgerLinesSql.amounts} ` +
    `FROM (SELECT *, amount - fee AS net FROM priced) AS p),\n` +
    `total AS (INSERT INTO balance_totals (merchant_id, livemode, currency, type, created_hour, available_hour, count, amount, fee, net) ` +
    `SELECT merchant_id, livemode, currency, type, date_trunc('hour', created, 'UTC'), date_trunc('hour', available_on, 'UTC'), count(*), ` +
    `sum(amount), sum(fee), sum(amount - fee) FROM priced GROUP BY 1, 2, 3, 4, 5, 6)`
  );
}

/** The parameters of `ledgerSql` for `entries`, each caused by the change at its position (from 1). */
export function ledgerArrays(entries: readonly { readonly entry: LedgerEntry; readonly position: number }[]): unknown[][] {
  const column = <T>(pick: (entry: LedgerEntry) => T) => entries.map(({ entry }) => pick(entry));
  return [
    column((e) => e.balanceTransactionId),
    column((e) => e.type),
    column((e) => e.amount.toString()),
    column((e) => e.created),
    entries.map(({ position }) => position),
  ];
}
