import type { MigrationInterface, QueryRunner } from "typeorm";

/** Disputes (issue 4). */
export class Disputes1764100000000 implements MigrationInterface {
  name = "Disputes1764100000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE disputes (
        merchant_id varchar(64) NOT NULL REFERENCES merchants (merchant_id),
        livemode boolean NOT NULL,
        dispute_id varchar(64) NOT NULL,
        payment_id varchar(64) NOT NULL,
        status varchar(32) NOT NULL,
        amount bigint NOT NULL CHECK (amount > 0),
        currency char(3) NOT NULL,
        reason text,
        evidence_due_by timestamptz NOT NULL,
        evidence jsonb,
        metadata jsonb NOT NULL DEFAULT '{}',
        created timestamptz NOT NULL,
        updated timestamptz NOT NULL,
        PRIMARY KEY (merchant_id, livemode, dispute_id),
        FOREIGN KEY (merchant_id, livemode, payment_id) REFERENCES payments (merchant_id, livemode, payment_id)
      )`);
    await runner.query(`CREATE INDEX disputes_list ON disputes (merchant_id, livemode, created DESC, dispute_id DESC)`);
    // One dispute per payment, as card networks allow.
    await runner.query(`CREATE UNIQUE INDEX disputes_payment ON disputes (merchant_id, livemode, payment_id)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE disputes`);
  }
}
