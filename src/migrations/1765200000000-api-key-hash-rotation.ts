import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Rotating API_KEY_HASH_SECRET (docs/operations.md, "Rotating secrets"): each key records the id of
 * the secret its key_hash is under (NULL: hashed before ids were recorded), so an operator can count
 * the keys not yet re-hashed with the current secret. Re-hashing a key changes no field that
 * authentication reads, and the key stays valid on every instance (each finds it by either hash), so
 * it no longer announces a change: each re-hash would otherwise empty every instance's key cache.
 */
export class ApiKeyHashRotation1765200000000 implements MigrationInterface {
  name = "ApiKeyHashRotation1765200000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE api_keys ADD COLUMN hash_secret_id varchar(16)`);
    await runner.query(`DROP TRIGGER api_key_changed ON api_keys`);
    await runner.query(`
      CREATE TRIGGER api_key_changed
      AFTER UPDATE OF key_id, merchant_id, livemode, publishable, expires_at, revoked_at OR DELETE OR TRUNCATE ON api_keys
      FOR EACH STATEMENT EXECUTE FUNCTION announce_api_key_change()`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TRIGGER api_key_changed ON api_keys`);
    await runner.query(`
      CREATE TRIGGER api_key_changed AFTER UPDATE OR DELETE OR TRUNCATE ON api_keys
      FOR EACH STATEMENT EXECUTE FUNCTION announce_api_key_change()`);
    await runner.query(`ALTER TABLE api_keys DROP COLUMN hash_secret_id`);
  }
}
