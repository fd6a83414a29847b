import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Every status column accepts only its resource's documented words. Only the service writes these
 * tables, but a word it does not know (a hand-written fix, a script, a future bug) would otherwise be
 * stored and then read back as a null status, an object that no guard, list filter or job would
 * recognise. Adding a check reads the whole table once, while the migration's transaction blocks
 * writes to it (operations.md, "Migrations").
 */
export class StatusChecks1765500000000 implements MigrationInterface {
  name = "StatusChecks1765500000000";

  async up(runner: QueryRunner): Promise<void> {
    for (const [table, words] of statuses) {
      const listed = words.map((word) => `'${word}'`).join(", ");
      await runner.query(`ALTER TABLE ${table} ADD CONSTRAINT ${table}_status CHECK (status IN (${listed}))`);
    }
  }

  async down(runner: QueryRunner): Promise<void> {
    for (const [table] of statuses) await runner.query(`ALTER TABLE ${table} DROP CONSTRAINT ${table}_status`);
  }
}

/** Each table's statuses as the API documents them (the proto enums' words) when this migration was written. */
const statuses: [table: string, words: string[]][] = [
  [
    "payments",
    [
      "requires_payment_method",
      "requires_confirmation",
      "requires_action",
      "processing",
      "requires_capture",
      "succeeded",
      "failed",
      "cancelled",
    ],
  ],
  ["refunds", ["pending", "succeeded", "failed", "cancelled", "manual_review"]],
  ["disputes", ["opened", "challenged", "accepted", "won", "lost", "expired"]],
  ["payouts", ["pending", "requires_fulfillment", "success", "failed", "cancelled"]],
  ["webhook_deliveries", ["pending", "delivered", "failed"]],
];
