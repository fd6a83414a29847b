import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Counts of each merchant's payments per environment and status, kept by triggers in the
 * transaction of every write (src/payments/counts.ts). A list's exact `total_count` otherwise walks
 * every match: 58,000 to 127,000 index entries a request for a large merchant's page of payments.
 * The triggers append signed deltas rather than update one row per status, so that concurrent
 * writes of one merchant never queue behind each other's row lock; the job runner merges them.
 * Inserts are counted once per statement (a batch of new payments is one delta per status), status
 * changes once per row and only when the status did change.
 */
export class PaymentCounts1765400000000 implements MigrationInterface {
  name = "PaymentCounts1765400000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE payment_counts (
        merchant_id varchar(64) NOT NULL,
        livemode boolean NOT NULL,
        status varchar(32) NOT NULL,
        n bigint NOT NULL
      )`);
    await runner.query("CREATE INDEX payment_counts_scope ON payment_counts (merchant_id, livemode, status)");
    await runner.query(`
      CREATE FUNCTION payment_counts_added() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO payment_counts (merchant_id, livemode, status, n)
          SELECT merchant_id, livemode, status, count(*) FROM added GROUP BY merchant_id, livemode, status;
        RETURN NULL;
      END $$`);
    await runner.query(`
      CREATE FUNCTION payment_counts_removed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO payment_counts (merchant_id, livemode, status, n)
          SELECT merchant_id, livemode, status, -count(*) FROM removed GROUP BY merchant_id, livemode, status;
        RETURN NULL;
      END $$`);
    await runner.query(`
      CREATE FUNCTION payment_counts_moved() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO payment_counts (merchant_id, livemode, status, n)
          VALUES (OLD.merchant_id, OLD.livemode, OLD.status, -1), (NEW.merchant_id, NEW.livemode, NEW.status, 1);
        RETURN NULL;
      END $$`);
    // Created before the existing payments are counted: the triggers' lock holds writers off until this migration commits.
    await runner.query(
      "CREATE TRIGGER payments_counted_inserts AFTER INSERT ON payments REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION payment_counts_added()",
    );
    await runner.query(
      "CREATE TRIGGER payments_counted_deletes AFTER DELETE ON payments REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION payment_counts_removed()",
    );
    await runner.query(
      "CREATE TRIGGER payments_counted_moves AFTER UPDATE OF status ON payments FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION payment_counts_moved()",
    );
    await runner.query(
      "INSERT INTO payment_counts (merchant_id, livemode, status, n) SELECT merchant_id, livemode, status, count(*) FROM payments GROUP BY merchant_id, livemode, status",
    );
  }

  async down(runner: QueryRunner): Promise<void> {
    for (const trigger of ["payments_counted_moves", "payments_counted_deletes", "payments_counted_inserts"]) {
      await runner.query(`DROP TRIGGER ${trigger} ON payments`);
    }
    for (const fn of ["payment_counts_moved", "payment_counts_removed", "payment_counts_added"])
      await runner.query(`DROP FUNCTION ${fn}()`);
    await runner.query("DROP TABLE payment_counts");
  }
}
