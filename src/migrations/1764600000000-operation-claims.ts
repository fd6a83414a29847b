import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * The claim an operation holds on a payment or a refund while it waits for a processor, so that no
 * transaction stays open across the call (src/db/claims.ts): which operation holds it, and until when.
 */
export class OperationClaims1764600000000 implements MigrationInterface {
  name = "OperationClaims1764600000000";

  async up(runner: QueryRunner): Promise<void> {
    for (const table of ["payments", "refunds"]) {
      await runner.query(`ALTER TABLE ${table} ADD COLUMN claim_token varchar(32), ADD COLUMN claimed_until timestamptz`);
    }
  }

  async down(runner: QueryRunner): Promise<void> {
    for (const table of ["payments", "refunds"]) {
      await runner.query(`ALTER TABLE ${table} DROP COLUMN claim_token, DROP COLUMN claimed_until`);
    }
  }
}
