import type { DataSource } from "typeorm";
import type { PresentedKeyHashes } from "../auth/api-key-secret.js";
import { preparedQuery } from "../db/prepared.js";
import { log } from "../log.js";
import type { InvalidKeys } from "./invalid-keys.js";
import type { KeyCache } from "./key-cache.js";
import type { KeyRecord } from "../auth/key-record.js";

/** A key as found by one of its hashes, with the hash it is stored under and the id of that hash's secret. */
interface FoundKey extends KeyRecord {
  readonly keyHash: Buffer;
  readonly hashSecretId: string | null;
}

const keyColumns = `key_id AS "keyId", merchant_id AS "merchantId", livemode, publishable,
            expires_at AS "expiresAt", revoked_at AS "revokedAt", key_hash AS "keyHash", hash_secret_id AS "hashSecretId"`;

/**
 * The key stored under any of `hashes`. One statement, so one snapshot: a key re-hashed by another
 * instance meanwhile is found under one hash or the other, never missed between two lookups.
 */
async function findKeyByHashes(dataSource: DataSource, hashes: readonly Buffer[]): Promise<FoundKey | null> {
  const rows =
    hashes.length === 1
      ? await preparedQuery<FoundKey>(dataSource, `SELECT ${keyColumns} FROM api_keys WHERE key_hash = $1`, [hashes[0]])
      : await preparedQuery<FoundKey>(dataSource, `SELECT ${keyColumns} FROM api_keys WHERE key_hash = ANY ($1::bytea[])`, [hashes]);
  return rows[0] ?? null;
}

/** What authentication needs of a found key: the hash and the secret's id stay out of the caches. */
function recordOf(found: FoundKey | null): KeyRecord | null {
  if (found === null) return null;
  const { keyId, merchantId, livemode, publishable, expiresAt, revokedAt } = found;
  return { keyId, merchantId, livemode, publishable, expiresAt, revokedAt };
}

/**
 * Finds a presented key in the database by its hash under the current secret or (during a rotation)
 * the previous or the next one. A key under the previous secret is re-hashed with the current one;
 * one under the current secret without a recorded secret id (hashed before ids were recorded) gets
 * its id; one under the next secret was re-hashed by an instance already switched, and stays. Each
 * write is conditional on the hash it replaces, so instances doing it at once leave the same row;
 * one that fails leaves the key as it was, to be written at its next lookup.
 */
async function findAndRehash(dataSource: DataSource, hashes: PresentedKeyHashes, secretId: string): Promise<KeyRecord | null> {
  const candidates = [hashes.current, hashes.previous, hashes.next].filter((hash): hash is Buffer => hash !== undefined);
  const found = await findKeyByHashes(dataSource, candidates);
  if (found === null || found.revokedAt !== null) return recordOf(found);
  if (found.keyHash.equals(hashes.current) && found.hashSecretId === null) {
    await rehash(
      dataSource,
      found,
      `UPDATE api_keys SET hash_secret_id = $3 WHERE key_id = $1 AND key_hash = $2 AND hash_secret_id IS NULL`,
      [hashes.current, secretId],
    );
  } else if (hashes.previous?.equals(found.keyHash) === true) {
    await rehash(dataSource, found, `UPDATE api_keys SET key_hash = $3, hash_secret_id = $4 WHERE key_id = $1 AND key_hash = $2`, [
      hashes.previous,
      hashes.current,
      secretId,
    ]);
  }
  return recordOf(found);
}

/** Runs one re-hashing write for `key`; a failure is logged (never a hash) and left for the key's next lookup. */
async function rehash(dataSource: DataSource, key: FoundKey, sql: string, params: unknown[]): Promise<void> {
  try {
    await dataSource.query(sql, [key.keyId, ...params]);
  } catch (error) {
    log.warn("api key not re-hashed; it is tried again at its next lookup", {
      key_id: key.keyId,
      error: error instanceof Error ? error.message : String(error),
    });
  }
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
    /** The id of the current API_KEY_HASH_SECRET, recorded on keys as they are re-hashed. */
    private readonly secretId: string,
  ) {}

  /**
   * The key, or null when no key has these hashes. `beforeDatabase` runs only when the database must
   * be asked, and may refuse the call by throwing (the failed-authentication limit of its address).
   * Both caches are keyed by the current hash alone and hold what every lookup found, so a key still
   * hashed under the previous (or next) secret is never remembered as invalid.
   */
  async find(hashes: PresentedKeyHashes, beforeDatabase: () => Promise<void>): Promise<KeyRecord | null> {
    const keyHash = hashes.current;
    const cache = this.cache;
    const cached = cache?.get(keyHash);
    if (cached !== undefined) return cached;
    const invalid = this.invalid.get(keyHash);
    if (invalid !== undefined) return invalid.record;
    await beforeDatabase();
    const mark = cache?.mark();
    const record = await findAndRehash(this.dataSource, hashes, this.secretId);
    if (record !== null) cache?.put(keyHash, record, mark!);
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
