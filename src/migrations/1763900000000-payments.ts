import type { MigrationInterface, QueryRunner } from "typeorm";

/** Payments, the events every status change writes, and the durable job queue (issue 3). */
export class Payments1763900000000 implements MigrationInterface {
  name = "Payments1763900000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE payments (
        merchant_id varchar(64) NOT NULL REFERENCES merchants (merchant_id),
        livemode boolean NOT NULL,
        payment_id varchar(64) NOT NULL,
        profile_id varchar(64) NOT NULL REFERENCES profiles (profile_id),
        status varchar(32) NOT NULL,
        amount bigint NOT NULL CHECK (amount > 0),
        currency char(3) NOT NULL,
        amount_capturable bigint NOT NULL DEFAULT 0 CHECK (amount_capturable >= 0),
        amount_received bigint CHECK (amount_received >= 0 AND amount_received <= amount),
        capture_method varchar(16) NOT NULL,
        capture_on timestamptz,
        payment_method varchar(32),
        payment_method_type varchar(32),
        card jsonb,
        customer_id varchar(64),
        email text,
        description text,
        statement_descriptor text,
        return_url text,
        client_secret text NOT NULL,
        next_action jsonb,
        error_code text,
        error_message text,
        cancellation_reason text,
        metadata jsonb NOT NULL DEFAULT '{}',
        processor varchar(32),
        processor_reference text,
        authentication_token varchar(64) UNIQUE,
        created timestamptz NOT NULL,
        modified_at timestamptz NOT NULL,
        PRIMARY KEY (merchant_id, livemode, payment_id)
      )`);
    await runner.query(`CREATE INDEX payments_list ON payments (merchant_id, livemode, created DESC, payment_id DESC)`);
    await runner.query(`
      CREATE TABLE events (
        event_id varchar(64) PRIMARY KEY,
        merchant_id varchar(64) NOT NULL REFERENCES merchants (merchant_id),
        livemode boolean NOT NULL,
        type varchar(64) NOT NULL,
        object_id varchar(64) NOT NULL,
        data jsonb NOT NULL,
        created timestamptz NOT NULL
      )`);
    await runner.query(`CREATE INDEX events_list ON events (merchant_id, livemode, created DESC, event_id DESC)`);
    await runner.query(`CREATE INDEX events_object ON events (merchant_id, livemode, object_id)`);
    await runner.query(`
      CREATE TABLE jobs (
        job_id bigserial PRIMARY KEY,
        kind varchar(64) NOT NULL,
        merchant_id varchar(64) NOT NULL,
        livemode boolean NOT NULL,
        object_id varchar(64) NOT NULL,
        run_at timestamptz NOT NULL,
        attempts integer NOT NULL DEFAULT 0,
        last_error text,
        created timestamptz NOT NULL
      )`);
    await runner.query(`CREATE INDEX jobs_due ON jobs (run_at)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE jobs`);
    await runner.query(`DROP TABLE events`);
    await runner.query(`DROP TABLE payments`);
  }
}
