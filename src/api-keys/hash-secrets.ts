import type { DataSource } from "typeorm";

/** Usable API keys (neither revoked nor expired) by whether their hash is known to be under the current secret. */
export interface KeysByHashSecret {
  /** Hashed with the current API_KEY_HASH_SECRET. */
  readonly current: number;
  /**
   * Hashed with another secret, or before secret ids were recorded (which may be the current one):
   * such a key is re-hashed the next time it authenticates while API_KEY_HASH_PREVIOUS_SECRET is set.
   */
  readonly notCurrent: number;
}

/**
 * Counts usable keys by the secret their hash is under, so an operator rotating API_KEY_HASH_SECRET
 * knows how many keys would stop working if the previous secret were removed now.
 */
export async function countKeysByHashSecret(dataSource: DataSource, secretId: string, now: Date): Promise<KeysByHashSecret> {
  const [row] = (await dataSource.query(
    `SELECT (count(*) FILTER (WHERE hash_secret_id = $1))::int AS current,
            (count(*) FILTER (WHERE hash_secret_id IS DISTINCT FROM $1))::int AS "notCurrent"
       FROM api_keys WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)`,
    [secretId, now],
  )) as KeysByHashSecret[];
  return { current: Number(row!.current), notCurrent: Number(row!.notCurrent) };
}
