import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * The tables of signed deltas (`list_counts`, `balance_totals`; src/db/deltas.ts) tell a merged row
 * from a delta (`merged`), so that a merge takes the deltas alone, found by a partial index that
 * holds only them, and adds them to their key's one merged row, which a partial unique index finds.
 * A merge used to group the whole table to find the keys with more than one row: 1 s every 2 s per
 * instance for the 710,000 rows of running totals of the grown database (bench/), a cost that grew
 * with history. Existing rows are merged here, one row per key.
 *
 * A balance read every row of its merchant's running totals (1,347 for the grown database's largest
 * merchant, one per day of history and type): it now reads its all-time net from `balance_accounts`,
 * one row per currency, which the merge keeps, and of the running totals only the deltas and the
 * hours still pending, by their availability.
 */
export class MergedDeltas1766400000000 implements MigrationInterface {
  name = "MergedDeltas1766400000000";

  async up(runner: QueryRunner): Promise<void> {
    for (const { table, keys, sums } of deltaTables) {
      await runner.query(`ALTER TABLE ${table} ADD COLUMN merged boolean NOT NULL DEFAULT false`);
      await runner.query(
        `WITH taken AS (DELETE FROM ${table} RETURNING *)
         INSERT INTO ${table} (${keys.join(", ")}, ${sums.join(", ")}, merged)
         SELECT ${keys.join(", ")}, ${sums.map((column) => `sum(${column})`).join(", ")}, true FROM taken GROUP BY ${keys.join(", ")}`,
      );
      await runner.query(`CREATE UNIQUE INDEX ${table}_merged ON ${table} (${keys.join(", ")}) WHERE merged`);
      await runner.query(`CREATE INDEX ${table}_deltas ON ${table} (${keys[0]}) WHERE NOT merged`);
      // A merge finds the deltas by their index only when the planner knows they are few.
      await runner.query(`ANALYZE ${table}`);
    }
    // Each balance's all-time net, which the merge adds the deltas to (ledger/totals.ts).
    await runner.query(`
      CREATE TABLE balance_accounts (
        merchant_id varchar(64) NOT NULL,
        livemode boolean NOT NULL,
        currency char(3) NOT NULL,
        net bigint NOT NULL,
        PRIMARY KEY (merchant_id, livemode, currency)
      )`);
    await runner.query(
      "INSERT INTO balance_accounts (merchant_id, livemode, currency, net) SELECT merchant_id, livemode, currency, sum(net) FROM balance_totals GROUP BY 1, 2, 3",
    );
    // A balance reads the hours still pending, not every row of the merchant's history.
    await runner.query("DROP INDEX balance_totals_scope");
    await runner.query(
      "CREATE INDEX balance_totals_availability ON balance_totals (merchant_id, livemode, available_hour) INCLUDE (currency, net)",
    );
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query("DROP INDEX balance_totals_availability");
    await runner.query(
      "CREATE INDEX balance_totals_scope ON balance_totals (merchant_id, livemode, currency) INCLUDE (available_hour, net)",
    );
    await runner.query("DROP TABLE balance_accounts");
    for (const { table } of deltaTables) {
      await runner.query(`DROP INDEX ${table}_deltas`);
      await runner.query(`DROP INDEX ${table}_merged`);
      await runner.query(`ALTER TABLE ${table} DROP COLUMN merged`);
    }
  }
}

/** Each table of deltas when this migration was written: what makes a key, and what is summed. */
const deltaTables = [
  { table: "list_counts", keys: ["list", "merchant_id", "livemode", "key"], sums: ["n"] },
  {
    table: "balance_totals",
    keys: ["merchant_id", "livemode", "currency", "type", "created_hour", "available_hour", "span_hours"],
    sums: ["count", "amount", "fee", "net"],
  },
];
