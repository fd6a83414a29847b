import { describe, expect, it } from "vitest";
import { runNpmScript } from "../support/server-log.js";
import { secretId } from "../../src/secrets/server-secret.js";
import { visaCard } from "../support/cards.js";
import { rest, type JsonBody } from "../support/clients.js";
import { fileDatabaseUrl, onFileDatabase, onPostgres, rows, serverProcessDatabase } from "../support/database.js";
import { expectRestError } from "../support/errors.js";
import { adminIssue, newMerchant, type TestMerchant } from "../support/merchant.js";
import { payoutAccounts, payoutBodies } from "../support/payout-destinations.js";
import { spawnServer, type ServerProcess } from "../support/server-process.js";
import { testDataEncryptionKey, testHashSecret } from "../support/service.js";
import { waitUntil } from "../support/wait.js";

/*
 * Rotating API_KEY_HASH_SECRET and DATA_ENCRYPTION_KEY as docs/operations.md ("Rotating secrets")
 * tells an operator to, with real servers restarted on each step's configuration and the real
 * `npm run rotate-secrets`: what was stored under the old secrets keeps working while they are
 * previous, the command leaves nothing under the old data key, and once the old secrets are removed
 * keys used during the rotation still authenticate while a key never used in it is refused.
 */

const oldHashSecret = testHashSecret;
const newHashSecret = "rotated-api-key-hash-secret-of-32+chars";
const oldDataKey = testDataEncryptionKey;
const newDataKey = "b7".repeat(32);

/** Step 2's configuration: the new secrets current, the old ones previous. */
const rotating = {
  API_KEY_HASH_SECRET: newHashSecret,
  API_KEY_HASH_PREVIOUS_SECRET: oldHashSecret,
  DATA_ENCRYPTION_KEY: newDataKey,
  DATA_ENCRYPTION_PREVIOUS_KEYS: oldDataKey,
};
/** Step 3's configuration: the new secrets alone. */
const rotated = { API_KEY_HASH_SECRET: newHashSecret, DATA_ENCRYPTION_KEY: newDataKey };

let database: ReturnType<typeof serverProcessDatabase> | undefined;

/** Where the servers and the command keep their data: the file's PostgreSQL database, or one embedded data dir used in turn. */
function storage(): ReturnType<typeof serverProcessDatabase> {
  database ??= serverProcessDatabase();
  return database;
}

/** Runs `work` against a server started with `env`, then stops it (the embedded database has one owner at a time). */
async function withServer<T>(env: NodeJS.ProcessEnv, work: (server: ServerProcess) => Promise<T>): Promise<T> {
  const server = await spawnServer({ ...(await storage()), INVALID_KEY_CACHE_SECONDS: "300", ...env });
  try {
    return await work(server);
  } finally {
    await server.stop();
  }
}

/** The fields of the `secrets rotated` line a `npm run rotate-secrets` run logged, and how it exited. */
interface RotateRun {
  readonly code: number | null;
  readonly output: string;
  readonly report: Record<string, number> | undefined;
}

async function npmRunRotateSecrets(env: NodeJS.ProcessEnv): Promise<RotateRun> {
  const inherited: NodeJS.ProcessEnv = { ...process.env };
  delete inherited.DATABASE_URL;
  delete inherited.DATA_DIR;
  const { code, output } = await runNpmScript("rotate-secrets", { ...inherited, ...(await storage()), LOG_LEVEL: "info", ...env });
  const line = output.split("\n").find((l) => l.includes('"message":"secrets rotated"'));
  return { code, output, report: line === undefined ? undefined : (JSON.parse(line) as Record<string, number>) };
}

const payouts = payoutBodies(() => new Date());

/** A payout held (confirm false) so that its destination stays stored, encrypted, until it is fulfilled. */
async function heldPayout(url: string, merchant: TestMerchant, idempotencyKey?: string): Promise<JsonBody> {
  const res = await rest(url, "POST", "/payouts/create", {
    apiKey: merchant.apiKey,
    body: payouts.bankPayout(merchant, payoutAccounts.succeeds, { confirm: false }),
    headers: idempotencyKey === undefined ? {} : { "x-idempotency-key": idempotencyKey },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.status).toBe("requires_fulfillment");
  return res.body;
}

/** Fulfils a held payout and waits for the job runner to send it: it can only if the destination decrypts. */
async function fulfilAndSend(url: string, apiKey: string, payoutId: string): Promise<JsonBody> {
  const fulfilled = await rest(url, "POST", `/payouts/${payoutId}/fulfill`, { apiKey });
  expect(fulfilled.status, JSON.stringify(fulfilled.body)).toBe(200);
  return waitUntil(
    async () => (await rest(url, "GET", `/payouts/${payoutId}`, { apiKey })).body,
    (payout) => payout.status !== "pending",
    2000,
  );
}

/** The id of the secret each of these keys' hashes is recorded under (PostgreSQL: read beside the running servers). */
async function hashSecretIds(keyIds: readonly string[]): Promise<(string | null)[]> {
  const found = await onFileDatabase((db) =>
    rows<{ key_id: string; hash_secret_id: string | null }>(db, "SELECT key_id, hash_secret_id FROM api_keys WHERE key_id = ANY ($1)", [
      keyIds,
    ]),
  );
  return keyIds.map((id) => found.find((row) => row.key_id === id)?.hash_secret_id ?? null);
}

describe("rotating API_KEY_HASH_SECRET and DATA_ENCRYPTION_KEY (docs/operations.md)", () => {
  let merchant: TestMerchant;
  /** A second key of the merchant that nobody uses during the rotation: it must be reissued. */
  let unusedKey: string;
  let unusedKeyId: string;
  /** Held payouts written under the old data key: one fulfilled during the rotation, one after it. */
  let sentDuringRotation: JsonBody;
  let sentAfterRotation: JsonBody;
  /** A held payout written under the new key during the rotation. */
  let writtenDuringRotation: JsonBody;
  /** Keys created by nobody in this test (an embedded database's first start prints a sandbox key). */
  let otherKeys = 0;
  /** A customer's card saved under the old secrets: its fingerprint is recomputed, and saving it again still finds it. */
  let customerId: string;
  let savedCard: JsonBody;

  it("before: keys, payouts and a saved card are stored under the old secrets", async () => {
    await withServer({}, async (server) => {
      merchant = await newMerchant(server.url);
      const customer = await rest(server.url, "POST", "/customers", { apiKey: merchant.apiKey, body: {} });
      customerId = customer.body.customer_id;
      const saved = await rest(server.url, "POST", "/payment_methods", {
        apiKey: merchant.apiKey,
        body: { payment_method: "card", card: visaCard, customer_id: customerId },
      });
      expect(saved.status, JSON.stringify(saved.body)).toBe(200);
      savedCard = saved.body;
      const unused = await adminIssue(server.url, merchant.merchantId, { kind: "secret" });
      unusedKey = unused.api_key;
      unusedKeyId = unused.key_id;
      sentDuringRotation = await heldPayout(server.url, merchant, "rotation-held-1");
      sentAfterRotation = await heldPayout(server.url, merchant);
      otherKeys = server.output().includes("Sandbox merchant ready") ? 1 : 0;
    });
  }, 180_000);

  it("with the new secrets current and the old ones previous, everything stored before works, and keys used are re-hashed", async () => {
    await withServer(rotating, async (server) => {
      // Twice: the first lookup misses under the new secret, and must not leave the key remembered as invalid.
      for (let i = 0; i < 2; i++) {
        expect((await rest(server.url, "GET", "/payouts/list", { apiKey: merchant.apiKey })).status).toBe(200);
      }
      // A request repeated with its idempotency key is still recognised (its fingerprint is under the old secret).
      const replay = await rest(server.url, "POST", "/payouts/create", {
        apiKey: merchant.apiKey,
        body: payouts.bankPayout(merchant, payoutAccounts.succeeds, { confirm: false }),
        headers: { "x-idempotency-key": "rotation-held-1" },
      });
      expect(replay.status, JSON.stringify(replay.body)).toBe(200);
      expect(replay.headers.get("idempotent-replayed")).toBe("true");
      expect(replay.body.payout_id).toBe(sentDuringRotation.payout_id);

      expect(await fulfilAndSend(server.url, merchant.apiKey, sentDuringRotation.payout_id)).toMatchObject({ status: "success" });
      writtenDuringRotation = await heldPayout(server.url, merchant);
      if (onPostgres) {
        expect(await hashSecretIds([merchant.keyId, unusedKeyId])).toEqual([
          secretId(Buffer.from(newHashSecret)),
          secretId(Buffer.from(oldHashSecret)),
        ]);
      }
    });
  }, 180_000);

  it("npm run rotate-secrets re-encrypts what is under the old key, counts the keys not re-hashed, and changes nothing when run again", async () => {
    const first = await npmRunRotateSecrets(rotating);
    expect(first.code, first.output).toBe(0);
    expect(first.report, first.output).toMatchObject({
      // The payout still held, and the saved card's number.
      data_values_reencrypted: 2,
      data_values_under_other_keys: 0,
      card_fingerprints_recomputed: 1,
      api_keys_current_secret: 1,
      api_keys_not_rehashed: 1 + otherKeys,
    });
    const again = await npmRunRotateSecrets(rotating);
    expect(again.code, again.output).toBe(0);
    expect(again.report, again.output).toMatchObject({
      data_values_reencrypted: 0,
      data_values_under_other_keys: 0,
      card_fingerprints_recomputed: 0,
    });
    for (const run of [first, again]) {
      for (const secret of [oldHashSecret, newHashSecret, oldDataKey, newDataKey]) expect(run.output).not.toContain(secret);
    }
    if (onPostgres) {
      const stored = await onFileDatabase((db) =>
        rows<{ ciphertext: string }>(
          db,
          "SELECT destination_ciphertext AS ciphertext FROM payouts WHERE destination_ciphertext IS NOT NULL",
        ),
      );
      expect(stored.map((row) => row.ciphertext.split(".").slice(0, 2).join("."))).toEqual([
        `v2.${secretId(Buffer.from(newDataKey, "hex"))}`,
        `v2.${secretId(Buffer.from(newDataKey, "hex"))}`,
      ]);
      const cards = await onFileDatabase((db) =>
        rows<{ ciphertext: string }>(db, "SELECT card_ciphertext AS ciphertext FROM payment_methods WHERE card_ciphertext IS NOT NULL"),
      );
      expect(cards.map((row) => row.ciphertext.split(".").slice(0, 2).join("."))).toEqual([
        `v2.${secretId(Buffer.from(newDataKey, "hex"))}`,
      ]);
    }
  }, 180_000);

  it("with the old secrets removed, payouts still send and used keys authenticate; a key never used in the rotation is refused", async () => {
    await withServer(rotated, async (server) => {
      expect(await fulfilAndSend(server.url, merchant.apiKey, sentAfterRotation.payout_id)).toMatchObject({ status: "success" });
      expect(await fulfilAndSend(server.url, merchant.apiKey, writtenDuringRotation.payout_id)).toMatchObject({ status: "success" });
      expectRestError(await rest(server.url, "GET", "/payouts/list", { apiKey: unusedKey }), 401, "IR_01");
      expect(server.output()).not.toContain(oldDataKey);
      // The card saved before the rotation, saved again: the same payment method, under its new fingerprint.
      const again = await rest(server.url, "POST", "/payment_methods", {
        apiKey: merchant.apiKey,
        body: { payment_method: "card", card: visaCard, customer_id: customerId },
      });
      expect(again.body.payment_method_id).toBe(savedCard.payment_method_id);
      expect(again.body.card.fingerprint).not.toBe(savedCard.card.fingerprint);
    });
  }, 180_000);
});

describe.skipIf(!onPostgres)("a rolling deploy of step 2, with instances on step 1 beside instances on step 2 (PostgreSQL)", () => {
  /** Step 1's configuration: the old secrets current, the new ones announced. */
  const announced = {
    API_KEY_HASH_SECRET: oldHashSecret,
    API_KEY_HASH_NEXT_SECRET: newHashSecret,
    DATA_ENCRYPTION_KEY: oldDataKey,
    DATA_ENCRYPTION_NEXT_KEY: newDataKey,
  };

  it("keys re-hashed or issued, payouts written and idempotency keys claimed by a switched instance all work on one not yet switched", async () => {
    const databaseUrl = await fileDatabaseUrl();
    // Only the instance not yet switched runs jobs, so it is the one that decrypts the payouts to send them.
    const before = await spawnServer({ DATABASE_URL: databaseUrl, ...announced });
    const after = await spawnServer({ DATABASE_URL: databaseUrl, ...rotating, JOB_POLL_MS: "3600000" });
    try {
      const merchant = await newMerchant(before.url);
      expect((await rest(after.url, "GET", "/payouts/list", { apiKey: merchant.apiKey })).status).toBe(200);
      expect(await hashSecretIds([merchant.keyId])).toEqual([secretId(Buffer.from(newHashSecret))]);
      expect((await rest(before.url, "GET", "/payouts/list", { apiKey: merchant.apiKey })).status).toBe(200);

      const issued = await adminIssue(after.url, merchant.merchantId, { kind: "secret" });
      expect((await rest(before.url, "GET", "/payouts/list", { apiKey: issued.api_key })).status).toBe(200);

      const held = await heldPayout(after.url, merchant, "rolling-1");
      const retried = await rest(before.url, "POST", "/payouts/create", {
        apiKey: merchant.apiKey,
        body: payouts.bankPayout(merchant, payoutAccounts.succeeds, { confirm: false }),
        headers: { "x-idempotency-key": "rolling-1" },
      });
      expect(retried.headers.get("idempotent-replayed")).toBe("true");
      expect(retried.body.payout_id).toBe(held.payout_id);
      expect(await fulfilAndSend(before.url, merchant.apiKey, held.payout_id)).toMatchObject({ status: "success" });
    } finally {
      await Promise.all([before.stop(), after.stop()]);
    }
  }, 180_000);
});
