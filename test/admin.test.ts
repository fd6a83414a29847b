import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { MerchantService } from "../gen/paymentservice/v1/merchant_pb.js";
import { isoUtc } from "./support/formats.js";
import { runningService } from "./support/running.js";
import { adminApiKey, startService } from "./support/service.js";
import { rest, rpcClient, type JsonBody } from "./support/clients.js";
import { expectRestError, expectRpcError } from "./support/errors.js";
import { newMerchant } from "./support/merchant.js";

const service = runningService();

/** Creates a merchant over REST as the operator and returns the response body. */
async function createMerchant(name?: string): Promise<JsonBody> {
  const res = await rest(service.url, "POST", "/merchants", { admin: true, body: name === undefined ? {} : { merchant_name: name } });
  expect(res.status).toBe(200);
  return res.body;
}

describe("admin API over REST", () => {
  it("creates a merchant with a default profile that has a webhook secret", async () => {
    const merchant = await createMerchant("Acme Ltd");
    expect(merchant).toEqual({
      merchant_id: expect.stringMatching(/^mer_[0-9A-Za-z]+$/),
      merchant_name: "Acme Ltd",
      default_profile_id: expect.stringMatching(/^pro_[0-9A-Za-z]+$/),
      created: expect.stringMatching(isoUtc),
    });

    const retrieved = await rest(service.url, "GET", `/merchants/${merchant.merchant_id}`, { admin: true });
    expect(retrieved.status).toBe(200);
    expect(retrieved.body).toEqual(merchant);

    const profile = await rest(service.url, "GET", `/merchants/${merchant.merchant_id}/profiles/${merchant.default_profile_id}`, {
      admin: true,
    });
    expect(profile.status).toBe(200);
    expect(profile.body).toMatchObject({
      profile_id: merchant.default_profile_id,
      merchant_id: merchant.merchant_id,
      webhook_secret: expect.stringMatching(/^whsec_[0-9A-Za-z]+$/),
      created: expect.stringMatching(isoUtc),
    });
    expect(Object.keys(profile.body).sort()).toEqual(
      [
        "created",
        "merchant_id",
        "profile_id",
        "profile_name",
        "return_url",
        "webhook_secret",
        "webhook_url",
        "previous_webhook_secret_expires_at",
        "processing_fee_bps",
        "dispute_fee",
        "settlement_delay_days",
      ].sort(),
    );
  });

  it("gives every merchant its own ids and webhook secret", async () => {
    const a = await createMerchant();
    const b = await createMerchant();
    expect(a.merchant_id).not.toBe(b.merchant_id);
    expect(a.default_profile_id).not.toBe(b.default_profile_id);
    const secretOf = async (m: { merchant_id: string; default_profile_id: string }) =>
      (await rest(service.url, "GET", `/merchants/${m.merchant_id}/profiles/${m.default_profile_id}`, { admin: true })).body.webhook_secret;
    expect(await secretOf(a)).not.toBe(await secretOf(b));
  });

  it("creates, retrieves and updates a profile; fields not sent stay unchanged", async () => {
    const merchant = await createMerchant();
    const base = `/merchants/${merchant.merchant_id}/profiles`;
    const created = await rest(service.url, "POST", base, {
      admin: true,
      body: { profile_name: "web shop", return_url: "https://shop.example.com/done", webhook_url: "http://hooks.example.com/pay" },
    });
    expect(created.status).toBe(200);
    expect(created.body).toEqual({
      profile_id: expect.stringMatching(/^pro_[0-9A-Za-z]+$/),
      merchant_id: merchant.merchant_id,
      profile_name: "web shop",
      return_url: "https://shop.example.com/done",
      webhook_url: "http://hooks.example.com/pay",
      webhook_secret: expect.stringMatching(/^whsec_[0-9A-Za-z]+$/),
      created: expect.stringMatching(isoUtc),
      // Set by a rotation only (test/webhooks.test.ts).
      previous_webhook_secret_expires_at: null,
      // No fees and two days' settlement unless set (test/ledger.test.ts).
      processing_fee_bps: 0,
      dispute_fee: 0,
      settlement_delay_days: 2,
    });
    expect(created.body.profile_id).not.toBe(merchant.default_profile_id);
    const path = `${base}/${created.body.profile_id}`;

    const retrieved = await rest(service.url, "GET", path, { admin: true });
    expect(retrieved.body).toEqual(created.body);

    const updated = await rest(service.url, "POST", path, { admin: true, body: { webhook_url: "https://hooks.example.com/v2" } });
    expect(updated.status).toBe(200);
    expect(updated.body).toEqual({ ...created.body, webhook_url: "https://hooks.example.com/v2" });

    const renamed = await rest(service.url, "POST", path, {
      admin: true,
      body: { profile_name: "shop 2", return_url: "https://shop.example.com/r" },
    });
    expect(renamed.body).toEqual({
      ...created.body,
      profile_name: "shop 2",
      return_url: "https://shop.example.com/r",
      webhook_url: "https://hooks.example.com/v2",
    });

    const unchanged = await rest(service.url, "POST", path, { admin: true, body: {} });
    expect(unchanged.status).toBe(200);
    expect(unchanged.body).toEqual(renamed.body);
    expect((await rest(service.url, "GET", path, { admin: true })).body).toEqual(renamed.body);
  });

  it('clears return_url and webhook_url with ""', async () => {
    const merchant = await createMerchant();
    const created = await rest(service.url, "POST", `/merchants/${merchant.merchant_id}/profiles`, {
      admin: true,
      body: { return_url: "https://shop.example.com/done", webhook_url: "https://hooks.example.com/pay" },
    });
    const path = `/merchants/${merchant.merchant_id}/profiles/${created.body.profile_id}`;
    const cleared = await rest(service.url, "POST", path, { admin: true, body: { return_url: "" } });
    expect(cleared.status).toBe(200);
    expect(cleared.body.return_url).toBeNull();
    expect(cleared.body.webhook_url).toBe("https://hooks.example.com/pay");
    expect((await rest(service.url, "GET", path, { admin: true })).body.return_url).toBeNull();
  });

  it.each([
    ["return_url", "not a url"],
    ["return_url", "ftp://files.example.com/x"],
    ["webhook_url", "javascript:alert(1)"],
    ["webhook_url", "/relative/path"],
  ])("rejects %s %j on create and update with IR_05 naming the field", async (field, value) => {
    const merchant = await createMerchant();
    const base = `/merchants/${merchant.merchant_id}/profiles`;
    const onCreate = await rest(service.url, "POST", base, { admin: true, body: { [field]: value } });
    expect(expectRestError(onCreate, 400, "IR_05")).toContain(field);

    const path = `${base}/${merchant.default_profile_id}`;
    const before = (await rest(service.url, "GET", path, { admin: true })).body;
    const onUpdate = await rest(service.url, "POST", path, { admin: true, body: { [field]: value, profile_name: "renamed" } });
    expect(expectRestError(onUpdate, 400, "IR_05")).toContain(field);
    expect((await rest(service.url, "GET", path, { admin: true })).body).toEqual(before);
  });

  it("answers 404 HE_02 for an unknown merchant or profile, and for another merchant's profile", async () => {
    const merchant = await createMerchant();
    const other = await createMerchant();
    expectRestError(await rest(service.url, "GET", "/merchants/mer_doesnotexist", { admin: true }), 404, "HE_02");
    expectRestError(await rest(service.url, "POST", "/merchants/mer_doesnotexist/profiles", { admin: true, body: {} }), 404, "HE_02");
    expectRestError(
      await rest(service.url, "GET", `/merchants/mer_doesnotexist/profiles/${merchant.default_profile_id}`, { admin: true }),
      404,
      "HE_02",
    );
    expectRestError(
      await rest(service.url, "GET", `/merchants/${merchant.merchant_id}/profiles/pro_doesnotexist`, { admin: true }),
      404,
      "HE_02",
    );
    const foreign = `/merchants/${merchant.merchant_id}/profiles/${other.default_profile_id}`;
    expectRestError(await rest(service.url, "GET", foreign, { admin: true }), 404, "HE_02");
    expectRestError(await rest(service.url, "POST", foreign, { admin: true, body: { profile_name: "hijack" } }), 404, "HE_02");
    const untouched = await rest(service.url, "GET", `/merchants/${other.merchant_id}/profiles/${other.default_profile_id}`, {
      admin: true,
    });
    expect(untouched.body.profile_name).not.toBe("hijack");
  });

  describe("authentication", () => {
    it("answers 401 IR_01 without the admin key, with a wrong one, and to a merchant secret key", async () => {
      const merchant = await newMerchant(service.url);
      const path = `/merchants/${merchant.merchantId}/profiles/${merchant.profileId}`;
      const attempts: Array<Record<string, string>> = [
        {},
        { "admin-api-key": "" },
        { "admin-api-key": "wrong-admin-key" },
        { "admin-api-key": `${adminApiKey}x` },
        { "api-key": merchant.apiKey },
        { "admin-api-key": merchant.apiKey },
      ];
      for (const headers of attempts) {
        expectRestError(await rest(service.url, "POST", "/merchants", { headers, body: {} }), 401, "IR_01");
        expectRestError(await rest(service.url, "GET", `/merchants/${merchant.merchantId}`, { headers }), 401, "IR_01");
        expectRestError(await rest(service.url, "GET", path, { headers }), 401, "IR_01");
        expectRestError(await rest(service.url, "POST", path, { headers, body: { profile_name: "x" } }), 401, "IR_01");
        expectRestError(await rest(service.url, "POST", `/merchants/${merchant.merchantId}/profiles`, { headers, body: {} }), 401, "IR_01");
      }
      // Nothing above changed the profile.
      expect((await rest(service.url, "GET", path, { admin: true })).body.profile_name).not.toBe("x");
    });

    it("answers 401 on every admin route when ADMIN_API_KEY is unset", async () => {
      const merchant = await newMerchant(service.url);
      const disabled = await startService({ ADMIN_API_KEY: "" });
      try {
        expectRestError(await rest(disabled.url, "POST", "/merchants", { admin: true, body: {} }), 401, "IR_01");
        expectRestError(await rest(disabled.url, "POST", "/merchants", { headers: { "admin-api-key": "" }, body: {} }), 401, "IR_01");
        expectRestError(await rest(disabled.url, "GET", `/merchants/${merchant.merchantId}`, { admin: true }), 401, "IR_01");
        expectRestError(
          await rest(disabled.url, "POST", "/api-keys", {
            admin: true,
            body: { merchant_id: merchant.merchantId, environment: "sandbox" },
          }),
          401,
          "IR_01",
        );
        await expectRpcError(
          rpcClient(MerchantService, disabled.url, "grpc", { admin: true }).createMerchant({}),
          Code.Unauthenticated,
          "IR_01",
        );
      } finally {
        await disabled.close();
      }
    });
  });
});

describe.each(["connect", "grpc"] as const)("admin API over %s", (protocol) => {
  const admin = () => rpcClient(MerchantService, service.url, protocol, { admin: true });

  it("creates a merchant, its default profile, and more profiles", async () => {
    const merchant = await admin().createMerchant({ merchantName: "RPC merchant" });
    expect(merchant.merchantId).toMatch(/^mer_[0-9A-Za-z]+$/);
    expect(merchant.defaultProfileId).toMatch(/^pro_[0-9A-Za-z]+$/);
    expect(merchant.merchantName).toBe("RPC merchant");
    expect(merchant.created).toBeDefined();

    // What the RPC created is what REST sees.
    const viaRest = await rest(service.url, "GET", `/merchants/${merchant.merchantId}`, { admin: true });
    expect(viaRest.body.default_profile_id).toBe(merchant.defaultProfileId);

    const defaultProfile = await admin().retrieveProfile({ merchantId: merchant.merchantId, profileId: merchant.defaultProfileId });
    expect(defaultProfile.merchantId).toBe(merchant.merchantId);
    expect(defaultProfile.webhookSecret).toMatch(/^whsec_[0-9A-Za-z]+$/);

    const profile = await admin().createProfile({ merchantId: merchant.merchantId, returnUrl: "https://a.example.com/back" });
    expect(profile.profileId).toMatch(/^pro_/);
    expect(profile.returnUrl).toBe("https://a.example.com/back");
    expect(profile.webhookUrl).toBeUndefined();

    const updated = await admin().updateProfile({
      merchantId: merchant.merchantId,
      profileId: profile.profileId,
      webhookUrl: "https://a.example.com/hook",
    });
    expect(updated.returnUrl).toBe("https://a.example.com/back");
    expect(updated.webhookUrl).toBe("https://a.example.com/hook");
    expect(updated.webhookSecret).toBe(profile.webhookSecret);
  });

  it("reports invalid URLs, unknown merchants and missing admin keys with the documented codes", async () => {
    const merchant = await admin().createMerchant({});
    const message = await expectRpcError(
      admin().createProfile({ merchantId: merchant.merchantId, webhookUrl: "mailto:ops@example.com" }),
      Code.InvalidArgument,
      "IR_05",
    );
    expect(message).toContain("webhook_url");
    await expectRpcError(
      admin().updateProfile({ merchantId: merchant.merchantId, profileId: merchant.defaultProfileId, returnUrl: "nope" }),
      Code.InvalidArgument,
      "IR_05",
    );
    await expectRpcError(admin().retrieveMerchant({ merchantId: "mer_doesnotexist" }), Code.NotFound, "HE_02");
    await expectRpcError(rpcClient(MerchantService, service.url, protocol).createMerchant({}), Code.Unauthenticated, "IR_01");
    const { apiKey } = await newMerchant(service.url);
    await expectRpcError(
      rpcClient(MerchantService, service.url, protocol, { apiKey }).retrieveMerchant({ merchantId: merchant.merchantId }),
      Code.Unauthenticated,
      "IR_01",
    );
  });
});
