import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * The number of each merchant's payments per environment and status, and of its events per
 * environment and type, kept by triggers in the transaction of every write (src/db/list-counts.ts).
 * A list's exact `total_count` otherwise walks every match: 58,000 to 151,000 index entries a request
 * for a large merchant's page of payments or events. The triggers append signed deltas rather than
 * update one row per status, so that concurrent writes of one merchant never queue behind each
 * other's row lock; the job runner merges them. Inserts and deletes are counted once per statement
 * (a batch of new payments is one delta per status), status changes once per row and only when the
 * status did change. An event's type never changes.
 */
export class ListCounts1765400000000 implements MigrationInterface {
  name = "ListCounts1765400000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE list_counts (
        list varchar(16) NOT NULL,
        merchant_id varchar(64) NOT NULL,
        livemode boolean NOT NULL,
        key varchar(64) NOT NULL,
        n bigint NOT NULL
      )`);
    await runner.query("CREATE INDEX list_counts_scope ON list_counts (list, merchant_id, livemode, key)");
    await runner.query(`
      CREATE FUNCTION count_payments() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO list_counts (list, merchant_id, livemode, key, n)
            SELECT 'payments', merchant_id, livemode, status, count(*) FROM added GROUP BY merchant_id, livemode, status;
        ELSIF TG_OP = 'DELETE' THEN
          INSERT INTO list_counts (list, merchant_id, livemode, key, n)
            SELECT 'payments', merchant_id, livemode, status, -count(*) FROM removed GROUP BY merchant_id, livemode, status;
        ELSE
          INSERT INTO list_counts (list, merchant_id, livemode, key, n)
            VALUES ('payments', OLD.merchant_id, OLD.livemode, OLD.status, -1), ('payments', NEW.merchant_id, NEW.livemode, NEW.status, 1);
        END IF;
        RETURN NULL;
      END $$`);
    await runner.query(`
      CREATE FUNCTION count_events() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO list_counts (list, merchant_id, livemode, key, n)
            SELECT 'events', merchant_id, livemode, type, count(*) FROM added GROUP BY merchant_id, livemode, type;
        ELSE
          INSERT INTO list_counts (list, merchant_id, livemode, key, n)
            SELECT 'events', merchant_id, livemode, type, -count(*) FROM removed GROUP BY merchant_id, livemode, type;
        END IF;
        RETURN NULL;
      END $$`);
    // Created before the existing rows are counted: the triggers' lock holds writers off until this migration commits.
    for (const [table, fn] of [
      ["payments", "count_payments"],
      ["events", "count_events"],
    ]) {
      await runner.query(
        `CREATE TRIGGER ${table}_counted_inserts AFTER INSERT ON ${table} REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`,
      );
      await runner.query(
        `CREATE TRIGGER ${table}_counted_deletes AFTER DELETE ON ${table} REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`,
      );
    }
    await runner.query(
      "CREATE TRIGGER payments_counted_moves AFTER UPDATE OF status ON payments FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION count_payments()",
    );
    await runner.query(
      "INSERT INTO list_counts (list, merchant_id, livemode, key, n) SELECT 'payments', merchant_id, livemode, status, count(*) FROM payments GROUP BY merchant_id, livemode, status",
    );
    await runner.query(
      "INSERT INTO list_counts (list, merchant_id, livemode, key, n) SELECT 'events', merchant_id, livemode, type, count(*) FROM events GROUP BY merchant_id, livemode, type",
    );
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query("DROP TRIGGER payments_counted_moves ON payments");
    for (const table of ["payments", "events"]) {
      await runner.query(`DROP TRIGGER ${table}_counted_deletes ON ${table}`);
      await runner.query(`DROP TRIGGER ${table}_counted_inserts ON ${table}`);
    }
    await runner.query("DROP FUNCTION count_events()");
    await runner.query("DROP FUNCTION count_payments()");
    await runner.query("DROP TABLE list_counts");
  }
}
