import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * What a payment can still refund, kept on the payment's own row: `amount_unrefundable` (its refunds
 * that are pending, succeeded or in manual review, and its disputes lost, accepted or expired) and
 * `disputes_open` (undecided disputes, which block refunds). Triggers keep both in the transaction of
 * every refund and dispute write. A new refund is then one guarded statement that locks the payment
 * row and checks the amount against the row itself (src/refunds/store.ts): after waiting for another
 * refund's lock, PostgreSQL checks the condition again on the row as that refund left it, where sums
 * over the refunds table would be read from the statement's older snapshot and let both through.
 */
export class RefundHolds1765700000000 implements MigrationInterface {
  name = "RefundHolds1765700000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(
      "ALTER TABLE payments ADD COLUMN amount_unrefundable bigint NOT NULL DEFAULT 0, ADD COLUMN disputes_open integer NOT NULL DEFAULT 0",
    );
    await runner.query(`
      CREATE FUNCTION hold_refunds() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        held bigint := 0;
      BEGIN
        IF TG_OP <> 'DELETE' AND NEW.status IN ('pending', 'succeeded', 'manual_review') THEN held := held + NEW.amount; END IF;
        IF TG_OP <> 'INSERT' AND OLD.status IN ('pending', 'succeeded', 'manual_review') THEN held := held - OLD.amount; END IF;
        IF held <> 0 THEN
          UPDATE payments SET amount_unrefundable = amount_unrefundable + held
           WHERE merchant_id = coalesce(NEW.merchant_id, OLD.merchant_id) AND livemode = coalesce(NEW.livemode, OLD.livemode)
             AND payment_id = coalesce(NEW.payment_id, OLD.payment_id);
        END IF;
        RETURN NULL;
      END $$`);
    await runner.query(`
      CREATE FUNCTION hold_disputes() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        lost bigint := 0;
        opened integer := 0;
      BEGIN
        IF TG_OP <> 'DELETE' THEN
          IF NEW.status IN ('accepted', 'lost', 'expired') THEN lost := lost + NEW.amount; END IF;
          IF NEW.status IN ('opened', 'challenged') THEN opened := opened + 1; END IF;
        END IF;
        IF TG_OP <> 'INSERT' THEN
          IF OLD.status IN ('accepted', 'lost', 'expired') THEN lost := lost - OLD.amount; END IF;
          IF OLD.status IN ('opened', 'challenged') THEN opened := opened - 1; END IF;
        END IF;
        IF lost <> 0 OR opened <> 0 THEN
          UPDATE payments SET amount_unrefundable = amount_unrefundable + lost, disputes_open = disputes_open + opened
           WHERE merchant_id = coalesce(NEW.merchant_id, OLD.merchant_id) AND livemode = coalesce(NEW.livemode, OLD.livemode)
             AND payment_id = coalesce(NEW.payment_id, OLD.payment_id);
        END IF;
        RETURN NULL;
      END $$`);
    await runner.query(
      "CREATE TRIGGER refunds_held AFTER INSERT OR DELETE OR UPDATE OF status, amount ON refunds FOR EACH ROW EXECUTE FUNCTION hold_refunds()",
    );
    await runner.query(
      "CREATE TRIGGER disputes_held AFTER INSERT OR DELETE OR UPDATE OF status, amount ON disputes FOR EACH ROW EXECUTE FUNCTION hold_disputes()",
    );
    await runner.query(`
      UPDATE payments AS p SET amount_unrefundable = held.amount, disputes_open = held.open
        FROM (
          SELECT merchant_id, livemode, payment_id, sum(amount) AS amount, sum(open) AS open FROM (
            SELECT merchant_id, livemode, payment_id, amount, 0 AS open FROM refunds WHERE status IN ('pending', 'succeeded', 'manual_review')
            UNION ALL
            SELECT merchant_id, livemode, payment_id, CASE WHEN status IN ('accepted', 'lost', 'expired') THEN amount ELSE 0 END,
                   CASE WHEN status IN ('opened', 'challenged') THEN 1 ELSE 0 END FROM disputes
          ) AS holds GROUP BY merchant_id, livemode, payment_id
        ) AS held
       WHERE p.merchant_id = held.merchant_id AND p.livemode = held.livemode AND p.payment_id = held.payment_id`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query("DROP TRIGGER disputes_held ON disputes");
    await runner.query("DROP TRIGGER refunds_held ON refunds");
    await runner.query("DROP FUNCTION hold_disputes()");
    await runner.query("DROP FUNCTION hold_refunds()");
    await runner.query("ALTER TABLE payments DROP COLUMN disputes_open, DROP COLUMN amount_unrefundable");
  }
}
