import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * ANALYZE skips the JSON columns: no statement filters, joins or sorts on them, so the planner never
 * uses their statistics, and building them took a quarter to a third of an ANALYZE of `events`
 * (30,000 sampled documents of about a kilobyte each, sorted). The service analyzes a growing table
 * every few seconds (src/db/statistics.ts), so the saving comes back each time. Measured at 390,000
 * events: 660–880 ms an ANALYZE of `events` before, 490–500 after; `payments` 480–530 before,
 * 385–440 after.
 */
export class JsonStatistics1765600000000 implements MigrationInterface {
  name = "JsonStatistics1765600000000";

  async up(runner: QueryRunner): Promise<void> {
    for (const [table, columns] of jsonColumns) {
      await runner.query(`ALTER TABLE ${table} ${columns.map((column) => `ALTER COLUMN ${column} SET STATISTICS 0`).join(", ")}`);
    }
  }

  async down(runner: QueryRunner): Promise<void> {
    for (const [table, columns] of jsonColumns) {
      await runner.query(`ALTER TABLE ${table} ${columns.map((column) => `ALTER COLUMN ${column} SET STATISTICS -1`).join(", ")}`);
    }
  }
}

/** Every jsonb column of the service's tables when this migration was written. */
const jsonColumns: [table: string, columns: string[]][] = [
  ["customers", ["address", "metadata"]],
  ["payments", ["card", "next_action", "metadata"]],
  ["events", ["data"]],
  ["refunds", ["metadata"]],
  ["disputes", ["evidence", "metadata"]],
  ["payouts", ["destination", "billing", "attempts", "metadata"]],
  ["sandbox_payout_transfers", ["outcome"]],
];
