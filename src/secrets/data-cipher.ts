import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { type ServerSecret, secretId } from "./server-secret.js";

/**
 * DATA_ENCRYPTION_KEY: 32 bytes written as 64 hex digits, the AES-256 key of stored sensitive data
 * (loadConfig has checked the form).
 */
export const dataEncryptionKey: ServerSecret = {
  variable: "DATA_ENCRYPTION_KEY",
  file: "data-encryption-key",
  parse: (configured) => Buffer.from(configured, "hex"),
};

/** The first stored format, from before keys had ids: `v1.<payload>`, under whichever key was configured then. */
const unnamedFormat = "v1";

/** The stored format naming its key: `v2.<key id>.<payload>`, so a rotation knows which key opens a value. */
const format = "v2";

/**
 * AES-256-GCM for the few values the service must keep to finish work but may never store in clear
 * (a payout's destination until it is paid). Each value is bound to its owner through the
 * additional data, so a ciphertext copied onto another row does not decrypt.
 *
 * New values are encrypted under the current key and carry its id (secretId); the other keys of a
 * rotation (DATA_ENCRYPTION_PREVIOUS_KEYS, DATA_ENCRYPTION_NEXT_KEY) only decrypt, so values written
 * under the old key keep working until `npm run rotate-secrets` has re-encrypted them, and values
 * written by instances already switched work on those not yet switched.
 */
export class DataCipher {
  /** The id of the key new values are encrypted under. */
  readonly currentKeyId: string;
  /** Every key that may decrypt, by id; the current key first. */
  private readonly keys: ReadonlyMap<string, Buffer>;

  constructor(current: Buffer, decryptOnly: readonly Buffer[] = []) {
    this.currentKeyId = secretId(current);
    this.keys = new Map([current, ...decryptOnly].map((key) => [secretId(key), key]));
  }

  /** `v2.<key id>.<base64 of iv | tag | ciphertext>`, under the current key. */
  encrypt(plaintext: string, owner: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.keys.get(this.currentKeyId)!, iv).setAAD(Buffer.from(owner, "utf8"));
    const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    return `${format}.${this.currentKeyId}.${Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64")}`;
  }

  /**
   * Throws when the value was not encrypted for `owner` under a configured key (tampered, moved, or
   * its key is no longer configured: the message names the key's id, never a key).
   */
  decrypt(stored: string, owner: string): string {
    const parts = stored.split(".");
    if (parts[0] === format && parts.length === 3) {
      const key = this.keys.get(parts[1]!);
      if (key === undefined) {
        throw new Error(
          `encrypted value is under data key id ${parts[1]}, which is not configured (DATA_ENCRYPTION_KEY, DATA_ENCRYPTION_PREVIOUS_KEYS, DATA_ENCRYPTION_NEXT_KEY)`,
        );
      }
      return open(key, parts[2]!, owner);
    }
    if (parts[0] === unnamedFormat && parts.length === 2) {
      // No id: whichever configured key opens it (GCM's tag tells a wrong key apart).
      for (const key of this.keys.values()) {
        try {
          return open(key, parts[1]!, owner);
        } catch {}
      }
      throw new Error("encrypted value (v1, without a key id) opens under no configured data key");
    }
    throw new Error(`unknown encrypted value format ${parts[0]}`);
  }

  /** Whether a stored value is already under the current key, so re-encrypting it would change nothing. */
  isCurrent(stored: string): boolean {
    return stored.startsWith(this.currentPrefix());
  }

  /** The beginning every value under the current key has, for finding the others in SQL. */
  currentPrefix(): string {
    return `${format}.${this.currentKeyId}.`;
  }
}

function open(key: Buffer, payload: string, owner: string): string {
  const bytes = Buffer.from(payload, "base64");
  const decipher = createDecipheriv("aes-256-gcm", key, bytes.subarray(0, 12))
    .setAAD(Buffer.from(owner, "utf8"))
    .setAuthTag(bytes.subarray(12, 28));
  return Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]).toString("utf8");
}
