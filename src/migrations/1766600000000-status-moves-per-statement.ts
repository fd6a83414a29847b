import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * A payment's status change is counted once per statement, as inserts and deletes already were
 * (migration 1765400000000): the statement's old rows count −1 and its new rows +1 per merchant,
 * environment and status, and a status whose sum is zero writes nothing. The row trigger it replaces
 * ran a two-row INSERT for every payment that changed status, each with an executor of its own:
 * 18–26 µs a payment in the statement that writes a batch of confirmed payments (pg_stat_statements,
 * create with confirm at 50 connections), where a batch of one merchant's payments now writes two
 * rows, 4–5 µs a payment.
 * A trigger with transition tables cannot name its columns, so it fires for every update of payments;
 * an update that moves no status sums to nothing.
 */
export class StatusMovesPerStatement1766600000000 implements MigrationInterface {
  name = "StatusMovesPerStatement1766600000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(
      countPayments(`
          INSERT INTO list_counts (list, merchant_id, livemode, key, n)
            SELECT 'payments', merchant_id, livemode, status, sum(n) FROM (
                SELECT merchant_id, livemode, status, -1 AS n FROM removed
                UNION ALL
                SELECT merchant_id, livemode, status, 1 FROM added
              ) AS moved
             GROUP BY merchant_id, livemode, status HAVING sum(n) <> 0;`),
    );
    await runner.query("DROP TRIGGER payments_counted_moves ON payments");
    await runner.query(
      "CREATE TRIGGER payments_counted_moves AFTER UPDATE ON payments REFERENCING OLD TABLE AS removed NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION count_payments()",
    );
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query("DROP TRIGGER payments_counted_moves ON payments");
    await runner.query(
      countPayments(`
          INSERT INTO list_counts (list, merchant_id, livemode, key, n)
            VALUES ('payments', OLD.merchant_id, OLD.livemode, OLD.status, -1), ('payments', NEW.merchant_id, NEW.livemode, NEW.status, 1);`),
    );
    await runner.query(
      "CREATE TRIGGER payments_counted_moves AFTER UPDATE OF status ON payments FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION count_payments()",
    );
  }
}

/** `count_payments()` of migration 1765400000000 with `update` as what it does on an update. */
function countPayments(update: string): string {
  return `
    CREATE OR REPLACE FUNCTION count_payments() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        INSERT INTO list_counts (list, merchant_id, livemode, key, n)
          SELECT 'payments', merchant_id, livemode, status, count(*) FROM added GROUP BY merchant_id, livemode, status;
      ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO list_counts (list, merchant_id, livemode, key, n)
          SELECT 'payments', merchant_id, livemode, status, -count(*) FROM removed GROUP BY merchant_id, livemode, status;
      ELSE${update}
      END IF;
      RETURN NULL;
    END $$`;
}
