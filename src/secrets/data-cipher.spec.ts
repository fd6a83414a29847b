import { createCipheriv, randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { DataCipher } from "./data-cipher.js";
import { secretId } from "./server-secret.js";

/* Stored ciphertexts across a rotation of DATA_ENCRYPTION_KEY: which keys open what, and what the errors say. */

const keyA = Buffer.alloc(32, 0xa1);
const keyB = Buffer.alloc(32, 0xb2);
const owner = "payout:mer_1:false:po_1";

/** A value as the first format stored it: `v1.<iv|tag|ciphertext>`, with no key id. */
function v1(key: Buffer, plaintext: string, aad: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", key, iv).setAAD(Buffer.from(aad, "utf8"));
  const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
  return `v1.${Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64")}`;
}

describe("DataCipher", () => {
  it("encrypts under the current key, naming it by id, and decrypts for the same owner only", () => {
    const cipher = new DataCipher(keyA);
    const stored = cipher.encrypt("4242424242424242", owner);
    expect(stored).toMatch(new RegExp(`^v2\\.${secretId(keyA)}\\.[A-Za-z0-9+/=]+$`));
    expect(stored).not.toContain("4242");
    expect(cipher.isCurrent(stored)).toBe(true);
    expect(cipher.decrypt(stored, owner)).toBe("4242424242424242");
    expect(() => cipher.decrypt(stored, "payout:mer_1:false:po_2")).toThrow();
  });

  it("a key id is 8 hex digits, the same for the same key, and different keys get different ids", () => {
    expect(secretId(keyA)).toMatch(/^[0-9a-f]{8}$/);
    expect(secretId(Buffer.from(keyA))).toBe(secretId(keyA));
    expect(secretId(keyB)).not.toBe(secretId(keyA));
  });

  it("after a rotation, values under the previous key still decrypt; new ones are under the new key", () => {
    const before = new DataCipher(keyA).encrypt("old", owner);
    const rotated = new DataCipher(keyB, [keyA]);
    expect(rotated.decrypt(before, owner)).toBe("old");
    expect(rotated.isCurrent(before)).toBe(false);
    const after = rotated.encrypt("new", owner);
    expect(rotated.isCurrent(after)).toBe(true);
    expect(after.startsWith(rotated.currentPrefix())).toBe(true);
    expect(new DataCipher(keyB).decrypt(after, owner)).toBe("new");
  });

  it("v1 values, which name no key, decrypt under the current or any previous key", () => {
    expect(new DataCipher(keyA).decrypt(v1(keyA, "x", owner), owner)).toBe("x");
    expect(new DataCipher(keyB, [keyA]).decrypt(v1(keyA, "y", owner), owner)).toBe("y");
    expect(() => new DataCipher(keyB).decrypt(v1(keyA, "z", owner), owner)).toThrow(
      "encrypted value (v1, without a key id) opens under no configured data key",
    );
  });

  it("a value under a key no longer configured fails naming the key's id, never a key", () => {
    const stored = new DataCipher(keyA).encrypt("secret", owner);
    let message = "";
    try {
      new DataCipher(keyB).decrypt(stored, owner);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toBe(
      `encrypted value is under data key id ${secretId(keyA)}, which is not configured (DATA_ENCRYPTION_KEY, DATA_ENCRYPTION_PREVIOUS_KEYS, DATA_ENCRYPTION_NEXT_KEY)`,
    );
    for (const key of [keyA, keyB]) {
      expect(message).not.toContain(key.toString("hex"));
      expect(message).not.toContain(key.toString("base64"));
    }
  });

  it("refuses a format it does not know", () => {
    expect(() => new DataCipher(keyA).decrypt("v9.abc", owner)).toThrow("unknown encrypted value format v9");
  });
});
