import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Saving a payment's card and mandates (decisions §10).
 * - A card a payment saves (`setup_future_usage`) is a payment method of the customer from the moment
 *   the payment asks its processor, pending on that payment (`pending_payment_id`) until its outcome:
 *   shown once the payment succeeds or is authorized, deleted if it fails. The unique index counts it
 *   already, so a save of the same card meanwhile finds it rather than making a second one. It
 *   expires like a token, so that one a crash left before its payment's record is reaped.
 * - A mandate is written when the off-session setup that asks for it succeeds. A single-use mandate
 *   is taken by the payment made under it before its processor is asked (`used_by_payment_id`), so
 *   that concurrent payments under it, on any instances, charge once.
 * - A payment keeps what its setup asks for until its outcome (`mandate_request`), and whether it is
 *   merchant-initiated (`off_session`).
 */
export class Mandates1766000000000 implements MigrationInterface {
  name = "Mandates1766000000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE mandates (
        merchant_id varchar(64) NOT NULL,
        livemode boolean NOT NULL,
        mandate_id varchar(64) NOT NULL,
        profile_id varchar(64) NOT NULL,
        customer_id varchar(64) NOT NULL,
        payment_method_id varchar(64) NOT NULL,
        status varchar(16) NOT NULL CONSTRAINT mandates_status CHECK (status IN ('active', 'revoked', 'inactive')),
        type varchar(16) NOT NULL CHECK (type IN ('multi_use', 'single_use')),
        amount_limit bigint,
        currency char(3),
        customer_acceptance jsonb NOT NULL,
        used_by_payment_id varchar(64),
        created timestamptz NOT NULL,
        updated timestamptz NOT NULL,
        PRIMARY KEY (merchant_id, livemode, mandate_id)
      )`);
    await runner.query("CREATE INDEX mandates_of_customer ON mandates (merchant_id, livemode, customer_id, created DESC, mandate_id DESC)");
    await runner.query(
      "CREATE INDEX mandates_of_payment_method ON mandates (merchant_id, livemode, payment_method_id) WHERE status = 'active'",
    );
    // No statement filters on the JSON itself (1765600000000-json-statistics.ts says why ANALYZE skips such columns).
    await runner.query("ALTER TABLE mandates ALTER COLUMN customer_acceptance SET STATISTICS 0");
    await runner.query("ALTER TABLE payment_methods ADD COLUMN pending_payment_id varchar(64)");
    await runner.query(
      "ALTER TABLE payments ADD COLUMN setup_future_usage varchar(16) CHECK (setup_future_usage IN ('on_session', 'off_session'))",
    );
    // A zero-amount payment only verifies and saves a card.
    await runner.query("ALTER TABLE payments DROP CONSTRAINT payments_amount_check");
    await runner.query(
      "ALTER TABLE payments ADD CONSTRAINT payments_amount_check CHECK (amount > 0 OR (amount = 0 AND setup_future_usage IS NOT NULL))",
    );
    await runner.query("ALTER TABLE payments ADD COLUMN off_session boolean NOT NULL DEFAULT false");
    await runner.query("ALTER TABLE payments ADD COLUMN mandate_id varchar(64)");
    await runner.query("ALTER TABLE payments ADD COLUMN mandate_request jsonb");
    await runner.query("ALTER TABLE payments ALTER COLUMN mandate_request SET STATISTICS 0");
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query("DELETE FROM payments WHERE amount = 0");
    await runner.query("ALTER TABLE payments DROP CONSTRAINT payments_amount_check");
    await runner.query("ALTER TABLE payments ADD CONSTRAINT payments_amount_check CHECK (amount > 0)");
    for (const column of ["mandate_request", "mandate_id", "off_session", "setup_future_usage"]) {
      await runner.query(`ALTER TABLE payments DROP COLUMN ${column}`);
    }
    await runner.query("ALTER TABLE payment_methods DROP COLUMN pending_payment_id");
    await runner.query("DROP TABLE mandates");
  }
}
