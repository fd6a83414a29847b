import { createHash, createHmac, createSecretKey, timingSafeEqual, type KeyObject } from "node:crypto";
import { randomBase62 } from "../ids.js";
import { type ServerSecret, secretId } from "../secrets/server-secret.js";

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
 * A presented key's hashes: under the current secret, and while a rotation lasts under the previous
 * secret (API_KEY_HASH_PREVIOUS_SECRET) or the next one (API_KEY_HASH_NEXT_SECRET).
 */
export interface PresentedKeyHashes {
  readonly current: Buffer;
  readonly previous: Buffer | undefined;
  readonly next: Buffer | undefined;
}

/** The secrets besides the current one that a rotation configures (at most one of them: loadConfig). */
export interface RotatingSecrets {
  /** The secret being replaced: keys hashed with it authenticate and are re-hashed with the current one. */
  readonly previous?: Buffer | undefined;
  /** The secret about to become current, on instances not yet switched: keys hashed with it authenticate as they are. */
  readonly next?: Buffer | undefined;
}

/**
 * Keyed hashing of API keys: the database holds HMAC-SHA256(secret, key), so a leaked table cannot be
 * used to authenticate and cannot be brute-forced without the server secret. While the secret is
 * rotated, a presented key is also hashed under the previous or the next secret, so keys stored
 * under either are found (docs/operations.md, "Rotating secrets").
 */
export class ApiKeyHasher {
  /** Imported once: every authenticated request hashes the key it presents. */
  private readonly secret: KeyObject;
  private readonly previous: KeyObject | undefined;
  private readonly next: KeyObject | undefined;
  /** The id of the current secret (secretId), stored with each key hashed under it. */
  readonly secretId: string;

  constructor(secret: Buffer, rotating: RotatingSecrets = {}) {
    this.secret = createSecretKey(secret);
    this.previous = rotating.previous === undefined ? undefined : createSecretKey(rotating.previous);
    this.next = rotating.next === undefined ? undefined : createSecretKey(rotating.next);
    this.secretId = secretId(secret);
  }

  /** The hash under the current secret: what new keys and request fingerprints store. */
  hash(plaintext: string): Buffer {
    return hmac(this.secret, plaintext);
  }

  /** Every hash a stored key or fingerprint of `plaintext` may have while this rotation lasts. */
  hashes(plaintext: string): PresentedKeyHashes {
    return {
      current: this.hash(plaintext),
      previous: this.previous === undefined ? undefined : hmac(this.previous, plaintext),
      next: this.next === undefined ? undefined : hmac(this.next, plaintext),
    };
  }
}

function hmac(secret: KeyObject, plaintext: string): Buffer {
  return createHmac("sha256", secret).update(plaintext).digest();
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
