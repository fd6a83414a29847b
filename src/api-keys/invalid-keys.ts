import type { KeyRecord } from "../auth/key-record.js";

/** Presented keys remembered at most; beyond that the oldest go first. */
const maxEntries = 10_000;

/** What the database said of a presented key that cannot authenticate: unknown (null), revoked or expired. */
export interface InvalidKey {
  readonly record: KeyRecord | null;
}

/**
 * Presented keys this instance found unable to authenticate (INVALID_KEY_CACHE_SECONDS), by their
 * keyed hash (never the key itself), so a flood repeating one wrong key costs one database lookup
 * per instance per period. It only ever says "invalid": a valid key is never kept here, so a
 * revocation still fails the very next request (the valid keys' cache, KeyCache, handles that).
 * Invalid stays invalid: an unknown hash cannot become a key (keys are random and new), revocation
 * is final, and expiry is read against the clock; only an operator's SQL undoing one of these waits
 * out the period.
 */
export class InvalidKeys {
  private readonly entries = new Map<string, { readonly invalid: InvalidKey; readonly until: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number,
  ) {}

  /** Whether the key may be remembered: only a key that fails authentication now. */
  static isInvalid(record: KeyRecord | null, now: number): boolean {
    return record === null || record.revokedAt !== null || (record.expiresAt !== null && record.expiresAt.getTime() <= now);
  }

  get(keyHash: Buffer): InvalidKey | undefined {
    const name = keyHash.toString("base64");
    const entry = this.entries.get(name);
    if (entry === undefined) return undefined;
    if (entry.until > this.now()) return entry.invalid;
    this.entries.delete(name);
    return undefined;
  }

  /** Remembers what the database said of a key, if it is invalid now; a valid one is never kept. */
  put(keyHash: Buffer, record: KeyRecord | null): void {
    const now = this.now();
    if (this.ttlMs === 0 || !InvalidKeys.isInvalid(record, now)) return;
    const name = keyHash.toString("base64");
    this.entries.delete(name);
    if (this.entries.size >= maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(name, { invalid: { record }, until: now + this.ttlMs });
  }
}
