import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import type { ServerSecret } from "./server-secret.js";

/**
 * DATA_ENCRYPTION_KEY: 32 bytes written as 64 hex digits, the AES-256 key of stored sensitive data
 * (loadConfig has checked the form).
 */
export const dataEncryptionKey: ServerSecret = {
  variable: "DATA_ENCRYPTION_KEY",
  file: "data-encryption-key",
  parse: (configured) => Buffer.from(configured, "hex"),
};

/** Version tag of the stored format, so that a later key or algorithm can be told apart. */
const format = "v1";

/**
 * AES-256-GCM for the few values the service must keep to finish work but may never store in clear
 * (a payout's destination until it is paid). Each value is bound to its owner through the
 * additional data, so a ciphertext copied onto another row does not decrypt.
 */
export class DataCipher {
  constructor(private readonly key: Buffer) {}

  /** `v1.<base64 of iv | tag | ciphertext>`. */
  encrypt(plaintext: string, owner: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.key, iv).setAAD(Buffer.from(owner, "utf8"));
    const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    return `${format}.${Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64")}`;
  }

  /** Throws when the value was not encrypted for `owner` under this key (tampered, moved or wrong key). */
  decrypt(stored: string, owner: string): string {
    const [version, payload] = stored.split(".");
    if (version !== format || payload === undefined) throw new Error(`unknown encrypted value format ${version}`);
    const bytes = Buffer.from(payload, "base64");
    const decipher = createDecipheriv("aes-256-gcm", this.key, bytes.subarray(0, 12))
      .setAAD(Buffer.from(owner, "utf8"))
      .setAuthTag(bytes.subarray(12, 28));
    return Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]).toString("utf8");
  }
}
