import type { DataSource } from "typeorm";
import { preparedQuery } from "../db/prepared.js";
import type { InvalidKeys } from "./invalid-keys.js";
import type { KeyCache } from "./key-cache.js";
import type { KeyRecord } from "./key-record.js";

async function findKeyByHash(dataSource: DataSource, keyHash: Buffer): Promise<KeyRecord | null> {
  const rows = await preparedQuery<KeyRecord>(
    dataSource,
    `SELECT key_id AS "keyId", merchant_id AS "merchantId", livemode, publishable,
            expires_at AS "expiresAt", revoked_at AS "revokedAt"
       FROM api_keys WHERE key_hash = $1`,
    [keyHash],
  );
  return rows[0] ?? null;
}

/**
 * Finds the key an authenticated request presents, by its keyed hash: from this instance's cache
 * while the cache is known to be current (PostgreSQL), else from the database. The embedded database
 * serves a single instance, which reads its keys every time. A key found invalid is remembered
 * briefly (InvalidKeys), so repeating it does not reach the database either.
 */
export class KeyLookup {
  constructor(
    private readonly dataSource: DataSource,
    private readonly cache: KeyCache | undefined,
    private readonly invalid: InvalidKeys,
  ) {}

  /**
   * The key, or null when no key has this hash. `beforeDatabase` runs only when the database must be
   * asked, and may refuse the call by throwing (the failed-authentication limit of its address).
   */
  async find(keyHash: Buffer, beforeDatabase: () => Promise<void>): Promise<KeyRecord | null> {
    const cache = this.cache;
    const cached = cache?.get(keyHash);
    if (cached !== undefined) return cached;
    const invalid = this.invalid.get(keyHash);
    if (invalid !== undefined) return invalid.record;
    await beforeDatabase();
    if (cache === undefined) {
      const record = await findKeyByHash(this.dataSource, keyHash);
      this.invalid.put(keyHash, record);
      return record;
    }
    const mark = cache.mark();
    const record = await findKeyByHash(this.dataSource, keyHash);
    if (record !== null) cache.put(keyHash, record, mark);
    this.invalid.put(keyHash, record);
    return record;
  }

  /**
   * Called after a key change committed (a revocation): resolves once no instance can still accept
   * the key as it was, so the caller's next request fails wherever it lands (decisions §2).
   */
  async settled(): Promise<void> {
    await this.cache?.settled();
  }

  async close(): Promise<void> {
    await this.cache?.close();
  }
}
