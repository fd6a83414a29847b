import type { MigrationInterface, QueryRunner } from "typeorm";

/** Merchants, profiles, API keys and customers (issue 2). */
export class Foundation1763800000000 implements MigrationInterface {
  name = "Foundation1763800000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE merchants (
        merchant_id varchar(64) PRIMARY KEY,
        merchant_name text,
        default_profile_id varchar(64) NOT NULL,
        created timestamptz NOT NULL
      )`);
    await runner.query(`
      CREATE TABLE profiles (
        profile_id varchar(64) PRIMARY KEY,
        merchant_id varchar(64) NOT NULL REFERENCES merchants (merchant_id),
        profile_name text,
        return_url text,
        webhook_url text,
        webhook_secret text NOT NULL,
        created timestamptz NOT NULL
      )`);
    await runner.query(`CREATE INDEX profiles_merchant ON profiles (merchant_id)`);
    await runner.query(`
      CREATE TABLE api_keys (
        key_id varchar(64) PRIMARY KEY,
        merchant_id varchar(64) NOT NULL REFERENCES merchants (merchant_id),
        name text,
        livemode boolean NOT NULL,
        publishable boolean NOT NULL,
        prefix varchar(12) NOT NULL,
        key_hash bytea NOT NULL UNIQUE,
        created timestamptz NOT NULL,
        expires_at timestamptz,
        revoked_at timestamptz
      )`);
    await runner.query(`CREATE INDEX api_keys_merchant_created ON api_keys (merchant_id, created DESC)`);
    await runner.query(`
      CREATE TABLE customers (
        merchant_id varchar(64) NOT NULL REFERENCES merchants (merchant_id),
        customer_id varchar(64) NOT NULL,
        livemode boolean NOT NULL,
        email text,
        name text,
        phone text,
        phone_country_code text,
        description text,
        address jsonb,
        metadata jsonb NOT NULL DEFAULT '{}',
        created timestamptz NOT NULL,
        updated timestamptz NOT NULL,
        deleted_at timestamptz,
        PRIMARY KEY (merchant_id, livemode, customer_id)
      )`);
    await runner.query(
      `CREATE INDEX customers_list ON customers (merchant_id, livemode, created DESC, customer_id) WHERE deleted_at IS NULL`,
    );
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE customers`);
    await runner.query(`DROP TABLE api_keys`);
    await runner.query(`DROP TABLE profiles`);
    await runner.query(`DROP TABLE merchants`);
  }
}
