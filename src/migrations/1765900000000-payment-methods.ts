import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Saved payment methods (decisions §10): a card kept for a customer, or a client-side token attached
 * to none, which expires 24 hours after it was made. The number is kept only encrypted
 * (`card_ciphertext`, dropped when the payment method is deleted); the CVC is never kept. One
 * customer has at most one live payment method per card (its fingerprint), which the unique index
 * holds against concurrent saves, on any number of instances. A token pays for one payment
 * (`used_by_payment_id`); a payment shows the payment method it was paid with.
 */
export class PaymentMethods1765900000000 implements MigrationInterface {
  name = "PaymentMethods1765900000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE payment_methods (
        merchant_id varchar(64) NOT NULL,
        livemode boolean NOT NULL,
        payment_method_id varchar(64) NOT NULL,
        customer_id varchar(64),
        payment_method varchar(16) NOT NULL CHECK (payment_method IN ('card')),
        payment_method_type varchar(32),
        card_last4 varchar(4) NOT NULL,
        card_brand varchar(16) NOT NULL,
        card_exp_month smallint NOT NULL CHECK (card_exp_month BETWEEN 1 AND 12),
        card_exp_year smallint NOT NULL,
        card_holder_name text,
        card_fingerprint varchar(32) NOT NULL,
        card_ciphertext text,
        billing jsonb,
        metadata jsonb NOT NULL,
        created timestamptz NOT NULL,
        updated timestamptz NOT NULL,
        expires_at timestamptz,
        used_by_payment_id varchar(64),
        deleted_at timestamptz,
        PRIMARY KEY (merchant_id, livemode, payment_method_id)
      )`);
    await runner.query(
      `CREATE UNIQUE INDEX payment_methods_one_per_card ON payment_methods (merchant_id, livemode, customer_id, card_fingerprint)
         WHERE customer_id IS NOT NULL AND deleted_at IS NULL`,
    );
    await runner.query(
      `CREATE INDEX payment_methods_of_customer ON payment_methods (merchant_id, livemode, customer_id, created DESC, payment_method_id DESC)
         WHERE deleted_at IS NULL`,
    );
    await runner.query("CREATE INDEX payment_methods_expiring ON payment_methods (expires_at) WHERE expires_at IS NOT NULL");
    // No statement filters on the JSON itself (1765600000000-json-statistics.ts says why ANALYZE skips such columns).
    await runner.query("ALTER TABLE payment_methods ALTER COLUMN billing SET STATISTICS 0");
    await runner.query("ALTER TABLE payment_methods ALTER COLUMN metadata SET STATISTICS 0");
    await runner.query("ALTER TABLE payments ADD COLUMN payment_method_id varchar(64)");
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query("ALTER TABLE payments DROP COLUMN payment_method_id");
    await runner.query("DROP TABLE payment_methods");
  }
}
