import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * A balance transaction carries its ledger lines (`line_accounts`, `line_amounts`, in that order:
 * the merchant's balance, the fees, the customer's funds or the payout in transit, each line whose
 * amount is not zero), and the database refuses a row whose lines are not two to four distinct
 * accounts summing to zero. `ledger_lines` stays what it was to a reader, now a view with a row per
 * line. A table of their own cost the statement that writes a batch of payments a second insert, of
 * two or three rows and their index entries a payment: 17 of the 47 µs an entry took in a statement
 * writing 100 (pgbench, one client; docs/performance.md). The lines are still stored apart from `net`
 * and `fee`, so `npm run ledger:verify` still checks one against the other. The check is written out
 * rather than as a function summing the array, which cost 8–10 µs a row.
 */
export class LedgerLinesOnTransactions1766700000000 implements MigrationInterface {
  name = "LedgerLinesOnTransactions1766700000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query("ALTER TABLE balance_transactions ADD COLUMN line_accounts varchar(32)[], ADD COLUMN line_amounts bigint[]");
    // The rows are append-only to the service; this one rewrite moves their lines in.
    await runner.query("ALTER TABLE balance_transactions DISABLE TRIGGER balance_transactions_append_only");
    await runner.query(`
      UPDATE balance_transactions AS t SET line_accounts = l.accounts, line_amounts = l.amounts
        FROM (SELECT merchant_id, livemode, balance_transaction_id, array_agg(account ORDER BY ${accountOrder}) AS accounts,
                     array_agg(amount ORDER BY ${accountOrder}) AS amounts
                FROM ledger_lines GROUP BY 1, 2, 3) AS l
       WHERE l.merchant_id = t.merchant_id AND l.livemode = t.livemode AND l.balance_transaction_id = t.balance_transaction_id`);
    await runner.query("ALTER TABLE balance_transactions ENABLE TRIGGER balance_transactions_append_only");
    // A transaction without lines fails here, as `ledger:verify` would have reported it.
    await runner.query(`
      ALTER TABLE balance_transactions
        ALTER COLUMN line_accounts SET NOT NULL,
        ALTER COLUMN line_amounts SET NOT NULL,
        ADD CONSTRAINT balance_transactions_lines_balance CHECK (
          cardinality(line_accounts) = cardinality(line_amounts) AND cardinality(line_amounts) BETWEEN 2 AND 4
          AND line_accounts <@ '{merchant_balance,fees,customer_funds,payout_clearing}'
          AND NOT line_accounts[1] = ANY (line_accounts[2:]) AND NOT line_accounts[2] = ANY (line_accounts[3:])
          AND NOT line_accounts[3] = ANY (line_accounts[4:])
          AND 0 <> ALL (line_amounts)
          AND coalesce(line_amounts[1], 0) + coalesce(line_amounts[2], 0) + coalesce(line_amounts[3], 0) + coalesce(line_amounts[4], 0) = 0)`);
    await runner.query("DROP TABLE ledger_lines");
    await runner.query(`
      CREATE VIEW ledger_lines AS
        SELECT t.merchant_id, t.livemode, t.balance_transaction_id, l.account, t.currency, l.amount
          FROM balance_transactions AS t CROSS JOIN LATERAL unnest(t.line_accounts, t.line_amounts) AS l (account, amount)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query("DROP VIEW ledger_lines");
    await runner.query(`
      CREATE TABLE ledger_lines (
        merchant_id varchar(64) NOT NULL,
        livemode boolean NOT NULL,
        balance_transaction_id varchar(64) NOT NULL,
        account varchar(32) NOT NULL CHECK (account IN ('merchant_balance', 'fees', 'customer_funds', 'payout_clearing')),
        currency char(3) NOT NULL,
        amount bigint NOT NULL,
        PRIMARY KEY (merchant_id, livemode, balance_transaction_id, account)
      )`);
    await runner.query(`
      INSERT INTO ledger_lines (merchant_id, livemode, balance_transaction_id, account, currency, amount)
      SELECT t.merchant_id, t.livemode, t.balance_transaction_id, l.account, t.currency, l.amount
        FROM balance_transactions AS t CROSS JOIN LATERAL unnest(t.line_accounts, t.line_amounts) AS l (account, amount)`);
    await runner.query(
      "CREATE TRIGGER ledger_lines_append_only BEFORE UPDATE OR DELETE ON ledger_lines FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only()",
    );
    await runner.query(
      "ALTER TABLE balance_transactions DROP CONSTRAINT balance_transactions_lines_balance, DROP COLUMN line_accounts, DROP COLUMN line_amounts",
    );
  }
}

/** The order of a transaction's lines: its effect on the merchant first, then what pays for it. */
const accountOrder = "array_position(ARRAY['merchant_balance', 'fees', 'customer_funds', 'payout_clearing']::varchar[], account)";
