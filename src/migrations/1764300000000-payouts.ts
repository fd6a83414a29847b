import type { MigrationInterface, QueryRunner } from "typeorm";

/** Payouts (issue 5) and the books of the sandbox payout rails. */
export class Payouts1764300000000 implements MigrationInterface {
  name = "Payouts1764300000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE payouts (
        merchant_id varchar(64) NOT NULL REFERENCES merchants (merchant_id),
        livemode boolean NOT NULL,
        payout_id varchar(64) NOT NULL,
        profile_id varchar(64) NOT NULL,
        customer_id varchar(64),
        status varchar(32) NOT NULL,
        amount bigint NOT NULL CHECK (amount > 0),
        currency char(3) NOT NULL,
        payout_type varchar(16) NOT NULL,
        priority varchar(16) NOT NULL,
        email text,
        name text,
        phone text,
        destination jsonb NOT NULL,
        destination_ciphertext text,
        billing jsonb,
        preferred_processor varchar(64),
        processor varchar(64),
        confirm boolean NOT NULL,
        error_code text,
        error_message text,
        attempts jsonb NOT NULL DEFAULT '[]',
        metadata jsonb NOT NULL DEFAULT '{}',
        created timestamptz NOT NULL,
        updated timestamptz NOT NULL,
        PRIMARY KEY (merchant_id, livemode, payout_id),
        -- A payout that can no longer be sent keeps no copy of its destination.
        CHECK (destination_ciphertext IS NULL OR status IN ('pending', 'requires_fulfillment'))
      )`);
    await runner.query(`CREATE INDEX payouts_list ON payouts (merchant_id, livemode, created DESC, payout_id DESC)`);
    await runner.query(`
      CREATE TABLE sandbox_payout_transfers (
        rail varchar(64) NOT NULL,
        idempotency_key varchar(255) NOT NULL,
        amount bigint NOT NULL,
        currency char(3) NOT NULL,
        destination_last4 varchar(4) NOT NULL,
        outcome jsonb NOT NULL,
        created timestamptz NOT NULL,
        PRIMARY KEY (rail, idempotency_key)
      )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE sandbox_payout_transfers`);
    await runner.query(`DROP TABLE payouts`);
  }
}
