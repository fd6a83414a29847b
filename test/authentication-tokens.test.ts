import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { applyMigrations } from "../src/db/data-source.js";
import { newId } from "../src/ids.js";
import { migrations } from "../src/migrations/index.js";
import { databaseOfItsOwn, onDatabase } from "./support/database.js";

/*
 * A payment's authentication token (the key of its 3-D Secure page) is unique among the payments that
 * have one; since migration 1766800000000 only those are indexed. Runs on the database the run uses:
 * a PostgreSQL database of its own, or an embedded DATA_DIR of its own.
 */

const merchant = newId("mer");
const profile = newId("pro");

async function addMerchant(db: pg.Client): Promise<void> {
  await db.query("INSERT INTO merchants (merchant_id, default_profile_id, created) VALUES ($1, $2, now())", [merchant, profile]);
  await db.query("INSERT INTO profiles (profile_id, merchant_id, webhook_secret, created) VALUES ($1, $2, 'whsec_test', now())", [
    profile,
    merchant,
  ]);
}

/** Writes a payment of the merchant waiting for its confirmation, as the release writes one, with `authenticationToken`. */
async function addPayment(db: pg.Client, authenticationToken: string | null = null): Promise<void> {
  await db.query(
    `INSERT INTO payments (merchant_id, livemode, payment_id, profile_id, status, amount, currency, capture_method, client_secret,
                           authentication_token, created, modified_at)
     VALUES ($1, false, $2, $3, 'requires_confirmation', 1000, 'USD', 'automatic', 'secret', $4, now(), now())`,
    [merchant, newId("pay"), profile, authenticationToken],
  );
}

describe("authentication tokens", () => {
  let url: string;
  let close: () => Promise<void> = async () => {};

  beforeAll(async () => {
    ({ url, close } = await databaseOfItsOwn("authentication-tokens"));
    await applyMigrations(url, 10_000, migrations);
    await onDatabase(url, addMerchant);
  }, 120_000);

  afterAll(() => close());

  it("keeps an authentication token to one payment, and lets any number of payments have none", async () => {
    await onDatabase(url, async (db) => {
      const token = newId("pay");
      await addPayment(db, token);
      await expect(addPayment(db, token)).rejects.toMatchObject({ code: "23505" });
      await addPayment(db);
      await addPayment(db);
      const { rows } = await db.query<{ n: string }>(
        "SELECT count(*) AS n FROM payments WHERE merchant_id = $1 AND authentication_token IS NULL",
        [merchant],
      );
      expect(Number(rows[0]!.n)).toBe(2);
    });
  });
});
