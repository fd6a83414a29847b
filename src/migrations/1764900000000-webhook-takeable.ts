import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Deliveries are looked up by when they can next be taken: when they are due and no lease holds
 * them. The index on next_attempt_at alone also held the deliveries being sent, which every look for
 * due ones then walked past and read in vain, thousands a second under load.
 */
export class WebhookTakeable1764900000000 implements MigrationInterface {
  name = "WebhookTakeable1764900000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP INDEX webhook_deliveries_due`);
    await runner.query(
      `CREATE INDEX webhook_deliveries_takeable ON webhook_deliveries ((greatest(next_attempt_at, coalesce(leased_until, '-infinity')))) WHERE status = 'pending'`,
    );
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP INDEX webhook_deliveries_takeable`);
    await runner.query(`CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'`);
  }
}
