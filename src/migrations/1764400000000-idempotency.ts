import type { MigrationInterface, QueryRunner } from "typeorm";

/** Idempotency keys (issue 6). */
export class Idempotency1764400000000 implements MigrationInterface {
  name = "Idempotency1764400000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE idempotency_keys (
        merchant_id varchar(64) NOT NULL REFERENCES merchants (merchant_id),
        livemode boolean NOT NULL,
        idempotency_key varchar(255) NOT NULL,
        -- Keyed hash of the procedure and the request: never the request itself (card numbers).
        fingerprint bytea NOT NULL,
        state varchar(16) NOT NULL CHECK (state IN ('in_flight', 'completed')),
        -- Which claim owns the key while in flight; only its owner may complete it.
        claim_token varchar(64) NOT NULL,
        locked_until timestamptz NOT NULL,
        response bytea,
        created timestamptz NOT NULL,
        expires_at timestamptz NOT NULL,
        PRIMARY KEY (merchant_id, livemode, idempotency_key),
        CHECK ((state = 'completed') = (response IS NOT NULL))
      )`);
    await runner.query(`CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE idempotency_keys`);
  }
}
