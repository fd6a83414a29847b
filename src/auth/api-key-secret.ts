import { createHash, createHmac, createSecretKey, timingSafeEqual, type KeyObject } from "node:crypto";
import { randomBase62 } from "../ids.js";
import type { ServerSecret } from "../secrets/server-secret.js";

/** Length of the stored, displayable beginning of a key (decisions §2). */
export const keyPrefixLength = 12;

/** Key prefixes of interface §5, by environment and kind. */
function keyTypePrefix(livemode: boolean, publishable: boolean): string {
  return `${publishable ? "pk_" : ""}${livemode ? "prd_" : "snd_"}`;
}

/** A new plaintext API key: its type prefix and 40 random base62 characters (≈238 bits). */
export function generateApiKey(livemode: boolean, publishable: boolean): string {
  return keyTypePrefix(livemode, publishable) + randomBase62(40);
}

/** Splits a presented key into environment and kind by its prefix; undefined when it is not a key. */
export function parseKeyType(plaintext: string): { livemode: boolean; publishable: boolean } | undefined {
  const match = /^(pk_)?(snd|prd)_[0-9A-Za-z]{32,}$/.exec(plaintext);
  return match === null ? undefined : { livemode: match[2] === "prd", publishable: match[1] !== undefined };
}

/**
 * Keyed hashing of API keys: the database holds HMAC-SHA256(secret, key), so a leaked table cannot be
 * used to authenticate and cannot be brute-forced without the server secret.
 */
export class ApiKeyHasher {
  /** Imported once: every authenticated request hashes the key it presents. */
  private readonly secret: KeyObject;

  constructor(secret: Buffer) {
    this.secret = createSecretKey(secret);
  }

  hash(plaintext: string): Buffer {
    return createHmac("sha256", this.secret).update(plaintext).digest();
  }
}

/** Compares two secrets in time independent of where they differ (and of their lengths). */
export function secretsEqual(presented: string, expected: string): boolean {
  const a = createHash("sha256").update(presented).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
}

/** API_KEY_HASH_SECRET: any text of 32 characters or more; instances sharing a database must share it. */
export const apiKeyHashSecret: ServerSecret = {
  variable: "API_KEY_HASH_SECRET",
  file: "api-key-hash-secret",
  parse: (configured) => Buffer.from(configured, "utf8"),
};
