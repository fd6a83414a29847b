import { describe, expect, it } from "vitest";
import { InvalidKeys } from "./invalid-keys.js";
import type { KeyRecord } from "../auth/key-record.js";

/* Presented keys remembered as invalid: only invalid ones, by hash, for INVALID_KEY_CACHE_SECONDS. */

const key = (fields: Partial<KeyRecord> = {}): KeyRecord => ({
  keyId: "key_1",
  merchantId: "mer_1",
  livemode: false,
  publishable: false,
  expiresAt: null,
  revokedAt: null,
  ...fields,
});

const hash = (n: number) => Buffer.alloc(32, n);

describe("InvalidKeys", () => {
  it("remembers unknown, revoked and expired keys for its period, then forgets them", () => {
    let now = 1_000_000;
    const invalid = new InvalidKeys(5000, () => now);
    const revoked = key({ revokedAt: new Date(now - 1) });
    const expired = key({ expiresAt: new Date(now) });
    invalid.put(hash(1), null);
    invalid.put(hash(2), revoked);
    invalid.put(hash(3), expired);
    expect([invalid.get(hash(1)), invalid.get(hash(2)), invalid.get(hash(3))]).toEqual([
      { record: null },
      { record: revoked },
      { record: expired },
    ]);
    now += 4999;
    expect(invalid.get(hash(1))).toEqual({ record: null });
    now += 1;
    expect([invalid.get(hash(1)), invalid.get(hash(2)), invalid.get(hash(3))]).toEqual([undefined, undefined, undefined]);
  });

  it("never remembers a key that authenticates, nor anything when its period is 0", () => {
    const now = 1_000_000;
    const invalid = new InvalidKeys(5000, () => now);
    invalid.put(hash(1), key());
    invalid.put(hash(2), key({ expiresAt: new Date(now + 1) }));
    expect([invalid.get(hash(1)), invalid.get(hash(2))]).toEqual([undefined, undefined]);
    const off = new InvalidKeys(0, () => now);
    off.put(hash(3), null);
    expect(off.get(hash(3))).toBeUndefined();
  });
});
