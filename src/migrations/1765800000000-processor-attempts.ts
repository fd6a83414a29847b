import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Record first (issue 40): a payment keeps the processor call it is making (`attempt`: the call, its
 * idempotency key, what applying its answer needs) from before the call until its outcome is written,
 * with the instance that makes it (`claimed_by`, which the claim statement already wrote). A crash in
 * between leaves the attempt for recovery to settle; the partial index finds the few that are left.
 *
 * The sandbox processor keeps its own books of payment calls, as its payout rails do, so that it can
 * answer a repeated idempotency key with its first answer, and tell recovery what a key did.
 *
 * An idempotency key keeps a random `effect_seed` until it expires, even when its request failed
 * after recording something: its retries name the object the first try recorded instead of making
 * another.
 */
export class ProcessorAttempts1765800000000 implements MigrationInterface {
  name = "ProcessorAttempts1765800000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query("ALTER TABLE payments ADD COLUMN attempt jsonb");
    await runner.query("CREATE INDEX payments_unsettled ON payments (claimed_until) WHERE attempt IS NOT NULL");
    // No statement filters on the JSON itself (1765600000000-json-statistics.ts says why ANALYZE skips such columns).
    await runner.query("ALTER TABLE payments ALTER COLUMN attempt SET STATISTICS 0");
    await runner.query(`
      CREATE TABLE sandbox_processor_calls (
        idempotency_key varchar(255) PRIMARY KEY,
        operation varchar(32) NOT NULL,
        outcome jsonb NOT NULL,
        created timestamptz NOT NULL
      )`);
    await runner.query("ALTER TABLE sandbox_processor_calls ALTER COLUMN outcome SET STATISTICS 0");
    await runner.query("ALTER TABLE idempotency_keys ADD COLUMN effect_seed varchar(24)");
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query("ALTER TABLE idempotency_keys DROP COLUMN effect_seed");
    await runner.query("DROP TABLE sandbox_processor_calls");
    await runner.query("DROP INDEX payments_unsettled");
    await runner.query("ALTER TABLE payments DROP COLUMN attempt");
  }
}
