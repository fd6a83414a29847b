import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Balances and the double-entry ledger (decisions §11, docs/ledger.md).
 * - Each profile's fees and settlement delay.
 * - `balance_transactions`: one per movement of a merchant's money, at most one of each type per
 *   source object (the unique index, which also serves the `source_id` filter).
 * - `ledger_lines`: the two or more lines of each, summing to zero across accounts.
 * - `balance_totals`: signed deltas per currency, type, hour of creation and hour of availability,
 *   appended by the statement that writes the transactions and merged by the job runner, which also
 *   folds the hours of settled history into days (`span_hours`; `balance_folds.through` marks where
 *   days end), so that a balance or a month's report sums a few hundred rows however long the history.
 * Both ledger tables refuse updates and deletes: a correction is a new entry.
 * The objects of a database made before the ledger get their transactions here, so balances are
 * right from the first start after the upgrade: fees were 0 then, and a captured payment's credit is
 * dated by the payment's creation (payments kept no capture time), available two days later (the
 * default delay).
 */
export class Ledger1766200000000 implements MigrationInterface {
  name = "Ledger1766200000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      ALTER TABLE profiles
        ADD COLUMN processing_fee_bps integer NOT NULL DEFAULT 0 CHECK (processing_fee_bps BETWEEN 0 AND 10000),
        ADD COLUMN dispute_fee bigint NOT NULL DEFAULT 0 CHECK (dispute_fee BETWEEN 0 AND 999999999999),
        ADD COLUMN settlement_delay_days integer NOT NULL DEFAULT 2 CHECK (settlement_delay_days BETWEEN 0 AND 365)`);
    await runner.query(`
      CREATE TABLE balance_transactions (
        merchant_id varchar(64) NOT NULL,
        livemode boolean NOT NULL,
        balance_transaction_id varchar(64) NOT NULL,
        profile_id varchar(64) NOT NULL,
        type varchar(32) NOT NULL CHECK (type IN ('payment', 'refund', 'dispute', 'dispute_reversal', 'payout', 'payout_reversal')),
        amount bigint NOT NULL,
        fee bigint NOT NULL,
        net bigint NOT NULL,
        currency char(3) NOT NULL,
        source_id varchar(64) NOT NULL,
        available_on timestamptz NOT NULL,
        created timestamptz NOT NULL,
        PRIMARY KEY (merchant_id, livemode, balance_transaction_id),
        CHECK (net = amount - fee)
      )`);
    await runner.query(
      "CREATE UNIQUE INDEX balance_transactions_of_source ON balance_transactions (merchant_id, livemode, source_id, type)",
    );
    await runner.query(
      "CREATE INDEX balance_transactions_by_created ON balance_transactions (merchant_id, livemode, created DESC, balance_transaction_id DESC)",
    );
    await runner.query("CREATE INDEX balance_transactions_by_availability ON balance_transactions (merchant_id, livemode, available_on)");
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
      CREATE TABLE balance_totals (
        merchant_id varchar(64) NOT NULL,
        livemode boolean NOT NULL,
        currency char(3) NOT NULL,
        type varchar(32) NOT NULL,
        created_hour timestamptz NOT NULL,
        available_hour timestamptz NOT NULL,
        span_hours smallint NOT NULL DEFAULT 1 CHECK (span_hours IN (1, 24)),
        count bigint NOT NULL,
        amount bigint NOT NULL,
        fee bigint NOT NULL,
        net bigint NOT NULL
      )`);
    // A balance reads only these: an index-only scan, the merge vacuuming the table every few seconds.
    await runner.query(
      "CREATE INDEX balance_totals_scope ON balance_totals (merchant_id, livemode, currency) INCLUDE (available_hour, net)",
    );
    await runner.query("CREATE TABLE balance_folds (id smallint PRIMARY KEY CHECK (id = 1), through timestamptz NOT NULL)");
    await runner.query("INSERT INTO balance_folds (id, through) VALUES (1, '-infinity')");
    await runner.query(`
      CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        RAISE EXCEPTION '% is append-only: a correction is a new entry', TG_TABLE_NAME;
      END $$`);
    for (const table of ["balance_transactions", "ledger_lines"]) {
      await runner.query(
        `CREATE TRIGGER ${table}_append_only BEFORE UPDATE OR DELETE ON ${table} FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only()`,
      );
    }
    await backfill(runner);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query("DROP TABLE balance_folds");
    await runner.query("DROP TABLE balance_totals");
    await runner.query("DROP TABLE ledger_lines");
    await runner.query("DROP TABLE balance_transactions");
    await runner.query("DROP FUNCTION ledger_append_only()");
    await runner.query("ALTER TABLE profiles DROP COLUMN processing_fee_bps, DROP COLUMN dispute_fee, DROP COLUMN settlement_delay_days");
  }
}

/** The transactions, lines and totals of the objects already there, by decisions §11's table. */
async function backfill(runner: QueryRunner): Promise<void> {
  await runner.query(`
    INSERT INTO balance_transactions (merchant_id, livemode, balance_transaction_id, profile_id, type, amount, fee, net, currency, source_id,
                                      available_on, created)
    SELECT merchant_id, livemode, 'txn_' || replace(gen_random_uuid()::text, '-', ''), profile_id, type, amount, 0, amount, currency, source_id,
           created + CASE WHEN type = 'payment' THEN interval '2 days' ELSE interval '0' END, created
      FROM (
        SELECT merchant_id, livemode, profile_id, 'payment' AS type, amount_received AS amount, currency, payment_id AS source_id, created
          FROM payments WHERE status = 'succeeded' AND amount_received > 0
        UNION ALL
        SELECT merchant_id, livemode, profile_id, 'refund', -amount, currency, refund_id, updated
          FROM refunds WHERE status = 'succeeded'
        UNION ALL
        SELECT merchant_id, livemode, profile_id, 'dispute', -amount, currency, dispute_id, created FROM disputes
        UNION ALL
        SELECT merchant_id, livemode, profile_id, 'dispute_reversal', amount, currency, dispute_id, updated
          FROM disputes WHERE status = 'won'
        UNION ALL
        SELECT merchant_id, livemode, profile_id, 'payout', -amount, currency, payout_id, created FROM payouts
        UNION ALL
        SELECT merchant_id, livemode, profile_id, 'payout_reversal', amount, currency, payout_id, updated
          FROM payouts WHERE status IN ('failed', 'cancelled')
      ) AS movement`);
  await runner.query(`
    INSERT INTO ledger_lines (merchant_id, livemode, balance_transaction_id, account, currency, amount)
    SELECT t.merchant_id, t.livemode, t.balance_transaction_id, line.account, t.currency, line.amount
      FROM balance_transactions AS t
      CROSS JOIN LATERAL (VALUES ('merchant_balance', t.amount),
                                 (CASE WHEN t.type LIKE 'payout%' THEN 'payout_clearing' ELSE 'customer_funds' END, -t.amount)) AS line (account, amount)`);
  await runner.query(`
    INSERT INTO balance_totals (merchant_id, livemode, currency, type, created_hour, available_hour, count, amount, fee, net)
    SELECT merchant_id, livemode, currency, type, date_trunc('hour', created, 'UTC'), date_trunc('hour', available_on, 'UTC'),
           count(*), sum(amount), sum(fee), sum(net)
      FROM balance_transactions GROUP BY 1, 2, 3, 4, 5, 6`);
}
