import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Statistics for `payments.attempt` again (1765800000000 turned them off with the other JSON
 * columns'). Recovery looks for the payments whose attempt is still open (`attempt IS NOT NULL`,
 * src/payments/operation.ts) every second; without the column's share of nulls the planner takes
 * nearly every row for a match, and chose to scan the table over the partial index that holds the
 * few: 1.5 s a look at 5 million payments, on every instance, where the index answers in
 * milliseconds. A column that is almost always null costs ANALYZE next to nothing.
 */
export class AttemptStatistics1766300000000 implements MigrationInterface {
  name = "AttemptStatistics1766300000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query("ALTER TABLE payments ALTER COLUMN attempt SET STATISTICS -1");
    // The first look after the upgrade plans with them already.
    await runner.query("ANALYZE payments (attempt)");
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query("ALTER TABLE payments ALTER COLUMN attempt SET STATISTICS 0");
  }
}
