import type { MigrationInterface, QueryRunner } from "typeorm";

/** Refunds (issue 4). */
export class Refunds1764000000000 implements MigrationInterface {
  name = "Refunds1764000000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE refunds (
        merchant_id varchar(64) NOT NULL REFERENCES merchants (merchant_id),
        livemode boolean NOT NULL,
        refund_id varchar(64) NOT NULL,
        payment_id varchar(64) NOT NULL,
        status varchar(32) NOT NULL,
        amount bigint NOT NULL CHECK (amount > 0),
        currency char(3) NOT NULL,
        reason varchar(32),
        refund_type varchar(16) NOT NULL,
        error_code text,
        error_message text,
        metadata jsonb NOT NULL DEFAULT '{}',
        processor_reference text,
        created timestamptz NOT NULL,
        updated timestamptz NOT NULL,
        PRIMARY KEY (merchant_id, livemode, refund_id),
        FOREIGN KEY (merchant_id, livemode, payment_id) REFERENCES payments (merchant_id, livemode, payment_id)
      )`);
    await runner.query(`CREATE INDEX refunds_list ON refunds (merchant_id, livemode, created DESC, refund_id DESC)`);
    await runner.query(`CREATE INDEX refunds_payment ON refunds (merchant_id, livemode, payment_id)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE refunds`);
  }
}
