import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Every change to an API key (revocation, expiry moved, rows deleted or truncated — by the API or by
 * an operator in SQL) is announced on the `api_key_changed` channel when it commits, so each instance drops the
 * keys it has cached (src/api-keys/key-cache.ts).
 */
export class ApiKeyChanges1764500000000 implements MigrationInterface {
  name = "ApiKeyChanges1764500000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE FUNCTION announce_api_key_change() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_notify('api_key_changed', '');
        RETURN NULL;
      END
      $$`);
    await runner.query(`
      CREATE TRIGGER api_key_changed AFTER UPDATE OR DELETE OR TRUNCATE ON api_keys
      FOR EACH STATEMENT EXECUTE FUNCTION announce_api_key_change()`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TRIGGER api_key_changed ON api_keys`);
    await runner.query(`DROP FUNCTION announce_api_key_change()`);
  }
}
