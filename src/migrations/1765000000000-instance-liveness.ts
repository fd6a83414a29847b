import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Who holds each lease (src/db/liveness.ts): a job, an operation's claim on a payment or refund, an
 * idempotency key in flight. An instance holds a session advisory lock while it lives, which
 * PostgreSQL drops the moment its connection closes, so a lease whose holder is gone (kill -9) can
 * be taken over at once rather than after its 60 s. `live_instances()` lists the holders alive now.
 */
export class InstanceLiveness1765000000000 implements MigrationInterface {
  name = "InstanceLiveness1765000000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE FUNCTION live_instances() RETURNS SETOF integer LANGUAGE sql STABLE AS $$
        SELECT objid::bigint::integer FROM pg_locks
         WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid = 1819047525
           AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
      $$`);
    await runner.query(`ALTER TABLE jobs ADD COLUMN leased_by integer`);
    await runner.query(`CREATE INDEX jobs_leased_by ON jobs (leased_by) WHERE leased_by IS NOT NULL`);
    for (const table of ["payments", "refunds", "idempotency_keys"]) {
      await runner.query(`ALTER TABLE ${table} ADD COLUMN claimed_by integer`);
    }
  }

  async down(runner: QueryRunner): Promise<void> {
    for (const table of ["payments", "refunds", "idempotency_keys"]) {
      await runner.query(`ALTER TABLE ${table} DROP COLUMN claimed_by`);
    }
    await runner.query(`DROP INDEX jobs_leased_by`);
    await runner.query(`ALTER TABLE jobs DROP COLUMN leased_by`);
    await runner.query(`DROP FUNCTION live_instances()`);
  }
}
