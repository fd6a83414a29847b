import type { DataSource } from "typeorm";
import { preparedQuery } from "../db/prepared.js";

/** What authentication needs to know about a presented key. */
export interface KeyRecord {
  readonly keyId: string;
  readonly merchantId: string;
  readonly livemode: boolean;
  readonly publishable: boolean;
  readonly expiresAt: Date | null;
  readonly revokedAt: Date | null;
}

/**
 * Finds a key by its keyed hash. It runs on every authenticated request and reads the database each
 * time (no cache), so a revocation or expiry holds on the very next request on every instance.
 */
export async function findKeyByHash(dataSource: DataSource, keyHash: Buffer): Promise<KeyRecord | null> {
  const rows = await preparedQuery<KeyRecord>(
    dataSource,
    `SELECT key_id AS "keyId", merchant_id AS "merchantId", livemode, publishable,
            expires_at AS "expiresAt", revoked_at AS "revokedAt"
       FROM api_keys WHERE key_hash = $1`,
    [keyHash],
  );
  return rows[0] ?? null;
}
