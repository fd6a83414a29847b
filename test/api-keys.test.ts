import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { existsSync, readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { ApiKeyKind, ApiKeyService } from "../gen/paymentservice/v1/api_key_pb.js";
import { Environment } from "../gen/paymentservice/v1/common_pb.js";
import { CustomerService } from "../gen/paymentservice/v1/customer_pb.js";
import { HealthService } from "../gen/paymentservice/v1/health_pb.js";
import { serve } from "../src/app.js";
import { rest, rpcClient } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { expectRestError, expectRpcError } from "./support/errors.js";
import { isoUtc } from "./support/formats.js";
import { adminIssue, newMerchant, type TestMerchant } from "./support/merchant.js";
import { onFileDatabase, onPostgres } from "./support/database.js";
import { runningService } from "./support/running.js";
import { startService, type TestService } from "./support/service.js";

const clock = new TestClock();
const service = runningService({}, clock);

const keyFormats = {
  "sandbox secret": /^snd_[0-9A-Za-z]{32,}$/,
  "production secret": /^prd_[0-9A-Za-z]{32,}$/,
  "sandbox publishable": /^pk_snd_[0-9A-Za-z]{32,}$/,
  "production publishable": /^pk_prd_[0-9A-Za-z]{32,}$/,
} as const;

async function health(apiKey: string, url = service.url) {
  return rest(url, "GET", "/health", { apiKey });
}

/** A well-formed key that was never issued. */
function unknownKey(): string {
  const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  return `snd_${Array.from({ length: 40 }, () => alphabet[Math.floor(Math.random() * 62)]).join("")}`;
}

describe("issuing keys", () => {
  it.each([
    ["sandbox", "secret"],
    ["production", "secret"],
    ["sandbox", "publishable"],
    ["production", "publishable"],
  ] as const)("issues a %s %s key in the documented format, shown only once", async (environment, kind) => {
    const merchant = await newMerchant(service.url);
    const issued = await adminIssue(service.url, merchant.merchantId, { environment, kind, name: "ci" });
    expect(issued).toEqual({
      key_id: expect.stringMatching(/^key_[0-9A-Za-z]+$/),
      merchant_id: merchant.merchantId,
      name: "ci",
      environment,
      kind,
      prefix: issued.api_key.slice(0, 12),
      api_key: expect.stringMatching(keyFormats[`${environment} ${kind}`]),
      created: expect.stringMatching(isoUtc),
      expires_at: null,
    });
    expect(issued.prefix).toHaveLength(12);

    // The key works in its environment.
    const checked = await health(issued.api_key);
    expect(checked.status).toBe(200);
    expect(checked.body).toEqual({ status: "ok", merchant_id: merchant.merchantId, environment });

    // Never shown again: retrieve and list carry everything but the plaintext.
    const retrieved = await rest(service.url, "GET", `/api-keys/${issued.key_id}`, { admin: true });
    expect(retrieved.status).toBe(200);
    expect(retrieved.body).toEqual({ ...issued, api_key: null });
    const listed = await rest(service.url, "GET", `/api-keys?merchant_id=${merchant.merchantId}`, { admin: true });
    expect(listed.status).toBe(200);
    expect(listed.body.data).toContainEqual({ ...issued, api_key: null });
    for (const key of listed.body.data) expect(key.api_key).toBeNull();
  });

  it("defaults to a secret key and issues a different key each time", async () => {
    const merchant = await newMerchant(service.url);
    const a = await adminIssue(service.url, merchant.merchantId);
    const b = await adminIssue(service.url, merchant.merchantId);
    expect(a.kind).toBe("secret");
    expect(a.api_key).toMatch(keyFormats["sandbox secret"]);
    expect(a.api_key).not.toBe(b.api_key);
    expect(a.key_id).not.toBe(b.key_id);
  });

  it("never stores the plaintext key in the database", async () => {
    const merchant = await newMerchant(service.url);
    const issued = await adminIssue(service.url, merchant.merchantId, { name: "stored" });
    const plaintext: string = issued.api_key;
    const hex = Buffer.from(plaintext, "utf8").toString("hex");
    const { dataSource } = service.app;

    const rows: Array<Record<string, unknown>> = await dataSource.query("SELECT * FROM api_keys WHERE key_id = $1", [issued.key_id]);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.prefix).toBe(plaintext.slice(0, 12));
    for (const [column, value] of Object.entries(rows[0]!)) {
      const texts = Buffer.isBuffer(value) ? [value.toString("utf8"), value.toString("hex"), value.toString("base64")] : [String(value)];
      for (const text of texts) {
        expect(text, `column ${column}`).not.toContain(plaintext);
        // Nothing beyond the 12-character prefix either.
        expect(text, `column ${column}`).not.toContain(plaintext.slice(12, 24));
      }
    }

    // Nor anywhere else: no row of any table contains the key, as text or as bytes.
    const tables: Array<{ table_name: string }> = await dataSource.query(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'",
    );
    expect(tables.map((t) => t.table_name)).toContain("api_keys");
    for (const { table_name } of tables) {
      const quoted = `"${table_name.replace(/"/g, '""')}"`;
      const hits: Array<{ n: number | string }> = await dataSource.query(
        `SELECT count(*) AS n FROM ${quoted} t WHERE strpos(t::text, $1) > 0 OR strpos(t::text, $2) > 0`,
        [plaintext.slice(12), hex.slice(24)],
      );
      expect(Number(hits[0]!.n), `table ${table_name}`).toBe(0);
    }
  });

  it("keeps an expires_at in the last millisecond of year 9999 to the millisecond, and lists it over REST, Connect and gRPC", async () => {
    const merchant = await newMerchant(service.url);
    const issued = await adminIssue(service.url, merchant.merchantId, { expires_at: "9999-12-31T23:59:59.999999999Z" });
    expect(issued.expires_at).toBe("9999-12-31T23:59:59.999Z");
    const listed = await rest(service.url, "GET", `/api-keys?merchant_id=${merchant.merchantId}`, { admin: true });
    expect(listed.status, JSON.stringify(listed.body)).toBe(200);
    expect(listed.body.data.map((key: { expires_at: string | null }) => key.expires_at)).toContain("9999-12-31T23:59:59.999Z");
    for (const protocol of ["connect", "grpc"] as const) {
      const page = await rpcClient(ApiKeyService, service.url, protocol, { admin: true }).listApiKeys({ merchantId: merchant.merchantId });
      expect(page.data.some((key) => key.expiresAt?.seconds === 253_402_300_799n && key.expiresAt.nanos === 999_000_000)).toBe(true);
    }
  });

  it("accepts a key whose expires_at is in the future and rejects one in the past with IR_05", async () => {
    const merchant = await newMerchant(service.url);
    const expiresAt = new Date(clock.now().getTime() + 3_600_000);
    const issued = await adminIssue(service.url, merchant.merchantId, { expires_at: expiresAt.toISOString() });
    expect(new Date(issued.expires_at).getTime()).toBe(expiresAt.getTime());

    const past = new Date(clock.now().getTime() - 1000).toISOString();
    const asAdmin = await rest(service.url, "POST", "/api-keys", {
      admin: true,
      body: { merchant_id: merchant.merchantId, environment: "sandbox", expires_at: past },
    });
    expect(expectRestError(asAdmin, 400, "IR_05")).toContain("expires_at");
    const asMerchant = await rest(service.url, "POST", "/api-keys", {
      apiKey: merchant.apiKey,
      body: { environment: "sandbox", expires_at: past },
    });
    expect(expectRestError(asMerchant, 400, "IR_05")).toContain("expires_at");
  });

  it("requires merchant_id and environment from the admin (IR_04) and answers HE_02 for an unknown merchant", async () => {
    const missing = await rest(service.url, "POST", "/api-keys", { admin: true, body: { environment: "sandbox" } });
    expect(expectRestError(missing, 400, "IR_04")).toContain("merchant_id");
    const noEnvironment = await rest(service.url, "POST", "/api-keys", {
      admin: true,
      body: { merchant_id: (await newMerchant(service.url)).merchantId },
    });
    expect(expectRestError(noEnvironment, 400, "IR_04")).toContain("environment");
    const listMissing = await rest(service.url, "GET", "/api-keys", { admin: true });
    expect(expectRestError(listMissing, 400, "IR_04")).toContain("merchant_id");
    const unknown = await rest(service.url, "POST", "/api-keys", {
      admin: true,
      body: { merchant_id: "mer_doesnotexist", environment: "sandbox" },
    });
    expectRestError(unknown, 404, "HE_02");
  });
});

describe("a merchant's own secret key", () => {
  it("creates keys for its own merchant (merchant_id implied) that authenticate", async () => {
    const merchant = await newMerchant(service.url);
    const created = await rest(service.url, "POST", "/api-keys", {
      apiKey: merchant.apiKey,
      body: { name: "server 2", environment: "sandbox" },
    });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ merchant_id: merchant.merchantId, name: "server 2", environment: "sandbox", kind: "secret" });
    expect(created.body.api_key).toMatch(keyFormats["sandbox secret"]);
    expect((await health(created.body.api_key)).body.merchant_id).toBe(merchant.merchantId);

    // Sending its own merchant_id is the same; a publishable key can be issued too.
    const explicit = await rest(service.url, "POST", "/api-keys", {
      apiKey: merchant.apiKey,
      body: { merchant_id: merchant.merchantId, environment: "sandbox", kind: "publishable" },
    });
    expect(explicit.status).toBe(200);
    expect(explicit.body.api_key).toMatch(keyFormats["sandbox publishable"]);
    expect(explicit.body.merchant_id).toBe(merchant.merchantId);
  });

  it("lists only its own keys of its own environment, without plaintext", async () => {
    const merchant = await newMerchant(service.url);
    const other = await newMerchant(service.url);
    const second = await adminIssue(service.url, merchant.merchantId, { name: "second" });
    const publishable = await adminIssue(service.url, merchant.merchantId, { kind: "publishable" });
    const production = await adminIssue(service.url, merchant.merchantId, { environment: "production" });
    await adminIssue(service.url, other.merchantId);

    const listed = await rest(service.url, "GET", "/api-keys", { apiKey: merchant.apiKey });
    expect(listed.status).toBe(200);
    const ids = listed.body.data.map((k: { key_id: string }) => k.key_id);
    expect(ids.sort()).toEqual([merchant.keyId, second.key_id, publishable.key_id].sort());
    expect(ids).not.toContain(production.key_id);
    expect(listed.body.total_count).toBe(3);
    expect(listed.body.has_more).toBe(false);
    for (const key of listed.body.data) {
      expect(key.api_key).toBeNull();
      expect(key.merchant_id).toBe(merchant.merchantId);
      expect(key.environment).toBe("sandbox");
    }

    // The production key sees the production partition only.
    const fromProduction = await rest(service.url, "GET", "/api-keys", { apiKey: production.api_key });
    expect(fromProduction.body.data.map((k: { key_id: string }) => k.key_id)).toEqual([production.key_id]);

    // Asking for another merchant's keys is not found, not a peek.
    const foreign = await rest(service.url, "GET", `/api-keys?merchant_id=${other.merchantId}`, { apiKey: merchant.apiKey });
    expectRestError(foreign, 404, "HE_02");
  });

  it("retrieves and revokes its own keys", async () => {
    const merchant = await newMerchant(service.url);
    const created = await rest(service.url, "POST", "/api-keys", { apiKey: merchant.apiKey, body: { environment: "sandbox" } });
    const keyId = created.body.key_id;

    const retrieved = await rest(service.url, "GET", `/api-keys/${keyId}`, { apiKey: merchant.apiKey });
    expect(retrieved.status).toBe(200);
    expect(retrieved.body).toEqual({ ...created.body, api_key: null });

    const revoked = await rest(service.url, "DELETE", `/api-keys/${keyId}/revoke`, { apiKey: merchant.apiKey });
    expect(revoked.status).toBe(200);
    expect(revoked.body).toEqual({ key_id: keyId, deleted: true });
    expectRestError(await health(created.body.api_key), 401, "IR_01");
    // The revoking key itself still works.
    expect((await health(merchant.apiKey)).status).toBe(200);
  });

  it("cannot see, revoke or create keys of another merchant (404 HE_02)", async () => {
    const merchant = await newMerchant(service.url);
    const other = await newMerchant(service.url);

    expectRestError(await rest(service.url, "GET", `/api-keys/${other.keyId}`, { apiKey: merchant.apiKey }), 404, "HE_02");
    expectRestError(await rest(service.url, "DELETE", `/api-keys/${other.keyId}/revoke`, { apiKey: merchant.apiKey }), 404, "HE_02");
    const created = await rest(service.url, "POST", "/api-keys", {
      apiKey: merchant.apiKey,
      body: { merchant_id: other.merchantId, environment: "sandbox" },
    });
    expectRestError(created, 404, "HE_02");

    // The other merchant's key is untouched and the other merchant got no new key.
    expect((await health(other.apiKey)).status).toBe(200);
    const otherKeys = await rest(service.url, "GET", "/api-keys", { apiKey: other.apiKey });
    expect(otherKeys.body.data.map((k: { key_id: string }) => k.key_id)).toEqual([other.keyId]);
  });

  it("cannot issue or touch keys of the other environment", async () => {
    const merchant = await newMerchant(service.url);
    const production = await adminIssue(service.url, merchant.merchantId, { environment: "production" });

    const upgrade = await rest(service.url, "POST", "/api-keys", { apiKey: merchant.apiKey, body: { environment: "production" } });
    expectRestError(upgrade, 403, "IR_22");
    const downgrade = await rest(service.url, "POST", "/api-keys", { apiKey: production.api_key, body: { environment: "sandbox" } });
    expectRestError(downgrade, 403, "IR_22");

    expectRestError(await rest(service.url, "GET", `/api-keys/${production.key_id}`, { apiKey: merchant.apiKey }), 404, "HE_02");
    expectRestError(await rest(service.url, "DELETE", `/api-keys/${production.key_id}/revoke`, { apiKey: merchant.apiKey }), 404, "HE_02");
    expect((await health(production.api_key)).status).toBe(200);
  });

  it("works over gRPC with the same rules", async () => {
    const merchant = await newMerchant(service.url);
    const other = await newMerchant(service.url);
    const keys = rpcClient(ApiKeyService, service.url, "grpc", { apiKey: merchant.apiKey });

    const created = await keys.createApiKey({ name: "grpc", environment: Environment.SANDBOX });
    expect(created.merchantId).toBe(merchant.merchantId);
    expect(created.kind).toBe(ApiKeyKind.SECRET);
    expect(created.apiKey).toMatch(keyFormats["sandbox secret"]);
    expect(created.prefix).toBe(created.apiKey!.slice(0, 12));

    const retrieved = await keys.retrieveApiKey({ keyId: created.keyId });
    expect(retrieved.apiKey).toBeUndefined();
    expect(retrieved.prefix).toBe(created.prefix);

    const listed = await keys.listApiKeys({});
    expect(listed.data.map((k) => k.keyId).sort()).toEqual([merchant.keyId, created.keyId].sort());
    expect(listed.data.every((k) => k.apiKey === undefined)).toBe(true);

    await expectRpcError(keys.retrieveApiKey({ keyId: other.keyId }), Code.NotFound, "HE_02");
    await expectRpcError(keys.createApiKey({ environment: Environment.PRODUCTION }), Code.PermissionDenied, "IR_22");
    await expectRpcError(
      keys.createApiKey({ environment: Environment.SANDBOX, expiresAt: timestampFromDate(new Date(clock.now().getTime() - 60_000)) }),
      Code.InvalidArgument,
      "IR_05",
    );
    await expectRpcError(
      rpcClient(ApiKeyService, service.url, "grpc", { admin: true }).createApiKey({ environment: Environment.SANDBOX }),
      Code.InvalidArgument,
      "IR_04",
    );

    expect(await keys.revokeApiKey({ keyId: created.keyId })).toMatchObject({ keyId: created.keyId, deleted: true });
    await expectRpcError(
      rpcClient(HealthService, service.url, "grpc", { apiKey: created.apiKey! }).check({}),
      Code.Unauthenticated,
      "IR_01",
    );
  });
});

describe("revocation", () => {
  it("revokes with the admin key: {key_id, deleted: true}, then 401 IR_01 on the very next request", async () => {
    const merchant = await newMerchant(service.url);
    expect((await health(merchant.apiKey)).status).toBe(200);

    const revoked = await rest(service.url, "DELETE", `/api-keys/${merchant.keyId}/revoke`, { admin: true });
    expect(revoked.status).toBe(200);
    expect(revoked.body).toEqual({ key_id: merchant.keyId, deleted: true });

    expectRestError(await health(merchant.apiKey), 401, "IR_01");
    expectRestError(await rest(service.url, "POST", "/customers", { apiKey: merchant.apiKey, body: { name: "Jane" } }), 401, "IR_01");
    expectRestError(await rest(service.url, "GET", "/api-keys", { apiKey: merchant.apiKey }), 401, "IR_01");

    // Gone from retrieve and list; revoking again is not found.
    expectRestError(await rest(service.url, "GET", `/api-keys/${merchant.keyId}`, { admin: true }), 404, "HE_02");
    const listed = await rest(service.url, "GET", `/api-keys?merchant_id=${merchant.merchantId}`, { admin: true });
    expect(listed.body.data.map((k: { key_id: string }) => k.key_id)).not.toContain(merchant.keyId);
    expectRestError(await rest(service.url, "DELETE", `/api-keys/${merchant.keyId}/revoke`, { admin: true }), 404, "HE_02");
  });

  it("lets a key revoke itself", async () => {
    const merchant = await newMerchant(service.url);
    const revoked = await rest(service.url, "DELETE", `/api-keys/${merchant.keyId}/revoke`, { apiKey: merchant.apiKey });
    expect(revoked.body).toEqual({ key_id: merchant.keyId, deleted: true });
    expectRestError(await health(merchant.apiKey), 401, "IR_01");
  });

  it("applies on another instance on the very next request", async () => {
    // Real PostgreSQL: a second, independent service on the same database. Embedded: each service
    // has its own database, so a second listener on the same app shows no per-listener state.
    const second = onPostgres ? await startService() : await serve(service.app);
    try {
      expect(second.url).not.toBe(service.url);
      const merchant = await newMerchant(service.url);
      const spare = await adminIssue(service.url, merchant.merchantId);
      // Both instances have accepted both keys (anything they might cache is now warm).
      for (const url of [service.url, second.url]) {
        expect((await health(merchant.apiKey, url)).status).toBe(200);
        expect((await health(spare.api_key, url)).status).toBe(200);
      }

      await rest(service.url, "DELETE", `/api-keys/${merchant.keyId}/revoke`, { admin: true });
      expectRestError(await health(merchant.apiKey, second.url), 401, "IR_01");
      expectRestError(await health(merchant.apiKey, service.url), 401, "IR_01");

      // And the other way round, revoked by the merchant on the second instance.
      const byMerchant = await rest(second.url, "DELETE", `/api-keys/${spare.key_id}/revoke`, { apiKey: spare.api_key });
      expect(byMerchant.body).toEqual({ key_id: spare.key_id, deleted: true });
      expectRestError(await health(spare.api_key, service.url), 401, "IR_01");
      await expectRpcError(
        rpcClient(HealthService, service.url, "grpc", { apiKey: spare.api_key }).check({}),
        Code.Unauthenticated,
        "IR_01",
      );
    } finally {
      await second.close();
    }
  });
});

describe("expiry", () => {
  it("a key works until its expires_at, then fails with 401 IR_01", async () => {
    const merchant = await newMerchant(service.url);
    const issued = await adminIssue(service.url, merchant.merchantId, {
      expires_at: new Date(clock.now().getTime() + 60_000).toISOString(),
    });

    expect((await health(issued.api_key)).status).toBe(200);
    clock.advance(59_000);
    expect((await health(issued.api_key)).status).toBe(200);
    expect((await rest(service.url, "GET", "/api-keys", { apiKey: issued.api_key })).status).toBe(200);

    clock.advance(2_000);
    expectRestError(await health(issued.api_key), 401, "IR_01");
    expectRestError(await rest(service.url, "GET", "/api-keys", { apiKey: issued.api_key }), 401, "IR_01");
    await expectRpcError(
      rpcClient(HealthService, service.url, "grpc", { apiKey: issued.api_key }).check({}),
      Code.Unauthenticated,
      "IR_01",
    );
    // A key without expires_at is unaffected.
    expect((await health(merchant.apiKey)).status).toBe(200);
  });
});

describe("publishable keys", () => {
  let publishable: TestMerchant;
  beforeAll(async () => {
    publishable = await newMerchant(service.url, { kind: "publishable" });
  });

  it("may check health", async () => {
    const res = await health(publishable.apiKey);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: "ok", merchant_id: publishable.merchantId, environment: "sandbox" });
  });

  it("gets 403 IR_22 on customers and on API keys", async () => {
    const apiKey = publishable.apiKey;
    expectRestError(await rest(service.url, "POST", "/customers", { apiKey, body: { name: "Jane" } }), 403, "IR_22");
    expectRestError(await rest(service.url, "POST", "/api-keys", { apiKey, body: { environment: "sandbox" } }), 403, "IR_22");
    expectRestError(
      await rest(service.url, "POST", "/api-keys", { apiKey, body: { environment: "sandbox", kind: "publishable" } }),
      403,
      "IR_22",
    );
    expectRestError(await rest(service.url, "GET", "/api-keys", { apiKey }), 403, "IR_22");
    expectRestError(await rest(service.url, "GET", `/api-keys/${publishable.keyId}`, { apiKey }), 403, "IR_22");
    expectRestError(await rest(service.url, "DELETE", `/api-keys/${publishable.keyId}/revoke`, { apiKey }), 403, "IR_22");
    // It was not revoked by the attempt.
    expect((await health(apiKey)).status).toBe(200);

    await expectRpcError(
      rpcClient(CustomerService, service.url, "grpc", { apiKey }).createCustomer({ name: "Jane" }),
      Code.PermissionDenied,
      "IR_22",
    );
    await expectRpcError(
      rpcClient(ApiKeyService, service.url, "grpc", { apiKey }).createApiKey({ environment: Environment.SANDBOX }),
      Code.PermissionDenied,
      "IR_22",
    );
  });
});

describe("keys that do not authenticate", () => {
  const cases: Array<[string, () => string | undefined]> = [
    ["no key", () => undefined],
    ["an empty key", () => ""],
    ["a garbage key", () => "not-a-key"],
    ["a key with a valid prefix but too short", () => "snd_abc123"],
    ["a well-formed key that was never issued", unknownKey],
    ["a well-formed production key that was never issued", () => unknownKey().replace(/^snd_/, "prd_")],
  ];

  it.each(cases)("answers 401 IR_01 to %s over REST", async (_, key) => {
    const apiKey = key();
    expectRestError(await rest(service.url, "GET", "/health", { apiKey }), 401, "IR_01");
    expectRestError(await rest(service.url, "POST", "/customers", { apiKey, body: { name: "Jane" } }), 401, "IR_01");
    expectRestError(await rest(service.url, "POST", "/api-keys", { apiKey, body: { environment: "sandbox" } }), 401, "IR_01");
    expectRestError(await rest(service.url, "GET", "/api-keys", { apiKey }), 401, "IR_01");
  });

  it.each(cases)("answers Unauthenticated with an IR_01 detail to %s over gRPC", async (_, key) => {
    const apiKey = key();
    await expectRpcError(rpcClient(HealthService, service.url, "grpc", { apiKey }).check({}), Code.Unauthenticated, "IR_01");
    await expectRpcError(rpcClient(ApiKeyService, service.url, "grpc", { apiKey }).listApiKeys({}), Code.Unauthenticated, "IR_01");
  });

  it("does not accept a merchant key in the admin-api-key header for an API key operation", async () => {
    const merchant = await newMerchant(service.url);
    const res = await rest(service.url, "POST", "/api-keys", {
      headers: { "admin-api-key": merchant.apiKey },
      body: { merchant_id: merchant.merchantId, environment: "sandbox" },
    });
    expectRestError(res, 401, "IR_01");
  });
});

/*
 * On PostgreSQL each instance keeps the keys it has read and learns of every change to a key through
 * LISTEN/NOTIFY, trusting its copies only for a second after each answered heartbeat (the revocation
 * tests above prove the API path). These prove the two ways a stale copy could otherwise survive:
 * a change made outside the API, and an instance that stops hearing about changes.
 */
describe.skipIf(!onPostgres)(
  "keys cached by several instances (PostgreSQL only: the embedded database serves one instance and caches nothing)",
  () => {
    const waitOutTrust = () => new Promise((resolve) => setTimeout(resolve, 1_200));

    async function twoWarmInstances(): Promise<{ second: TestService; merchant: TestMerchant }> {
      const second = await startService();
      const merchant = await newMerchant(service.url);
      for (const url of [service.url, second.url]) expect((await health(merchant.apiKey, url)).status).toBe(200);
      return { second, merchant };
    }

    it("a key revoked by an operator in SQL stops working on every instance within a second", async () => {
      const { second, merchant } = await twoWarmInstances();
      try {
        await onFileDatabase((db) => db.query("UPDATE api_keys SET revoked_at = now() WHERE key_id = $1", [merchant.keyId]));
        await waitOutTrust();
        for (const url of [service.url, second.url]) expectRestError(await health(merchant.apiKey, url), 401, "IR_01");
      } finally {
        await second.close();
      }
    });

    it("an idempotent revocation applies on every instance on the very next request, and its replay answers the same", async () => {
      const { second, merchant } = await twoWarmInstances();
      try {
        const revoke = () =>
          rest(service.url, "DELETE", `/api-keys/${merchant.keyId}/revoke`, {
            apiKey: merchant.apiKey,
            headers: { "Idempotency-Key": `revoke-${merchant.keyId}` },
          });
        const first = await revoke();
        expect(first.body).toEqual({ key_id: merchant.keyId, deleted: true });
        for (const url of [second.url, service.url]) expectRestError(await health(merchant.apiKey, url), 401, "IR_01");
        const spare = await adminIssue(service.url, merchant.merchantId);
        const replay = await rest(service.url, "DELETE", `/api-keys/${merchant.keyId}/revoke`, {
          apiKey: spare.api_key,
          headers: { "Idempotency-Key": `revoke-${merchant.keyId}` },
        });
        // Keys are scoped by merchant and environment, so the spare key of the same merchant replays it.
        expect(replay.body).toEqual(first.body);
        expect(replay.headers.get("idempotent-replayed")).toBe("true");
      } finally {
        await second.close();
      }
    });

    it("an instance that stops hearing about changes stops trusting the keys it cached", async () => {
      const { second, merchant } = await twoWarmInstances();
      // Freeze the listening sessions of both instances (the database runs on this machine in CI):
      // no notification reaches them and their heartbeats stop answering.
      const listeners = await onFileDatabase(async (db) => {
        const rows = await db.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE application_name = 'payment-service key cache' AND datname = current_database()",
        );
        return rows.rows.map((r) => r.pid);
      });
      expect(listeners.length).toBeGreaterThanOrEqual(2);
      // Never signal a process that is not one of those sessions (a database elsewhere shares no pids).
      const local = listeners.filter(
        (pid) => existsSync(`/proc/${pid}/cmdline`) && readFileSync(`/proc/${pid}/cmdline`, "utf8").startsWith("postgres"),
      );
      expect(local, "this test freezes PostgreSQL sessions, so it needs the database on this machine").toEqual(listeners);
      for (const pid of listeners) process.kill(pid, "SIGSTOP");
      try {
        await onFileDatabase((db) => db.query("UPDATE api_keys SET revoked_at = now() WHERE key_id = $1", [merchant.keyId]));
        await waitOutTrust();
        for (const url of [service.url, second.url]) {
          expect((await health(merchant.apiKey, url)).body).toMatchObject({
            error: { code: "IR_01", message: "This API key has been revoked" },
          });
        }
      } finally {
        for (const pid of listeners) process.kill(pid, "SIGCONT");
        await second.close();
      }
    });
  },
);
