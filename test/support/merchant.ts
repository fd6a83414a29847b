import { expect } from "vitest";
import { rest, type JsonBody } from "./clients.js";

/** A merchant created through the admin API, with a sandbox secret key. */
export interface TestMerchant {
  readonly merchantId: string;
  readonly profileId: string;
  readonly apiKey: string;
  readonly keyId: string;
}

/**
 * Creates a fresh merchant and key for a test, as an operator would. Each test works in its own
 * merchant, so tests sharing a database never see each other's objects.
 */
export async function newMerchant(
  baseUrl: string,
  key: { environment?: "sandbox" | "production"; kind?: "secret" | "publishable" } = {},
): Promise<TestMerchant> {
  const merchant = await rest(baseUrl, "POST", "/merchants", { admin: true, body: { merchant_name: "Test merchant" } });
  if (merchant.status !== 200) throw new Error(`creating a merchant failed: ${JSON.stringify(merchant.body)}`);
  const issued = await adminIssue(baseUrl, merchant.body.merchant_id, {
    environment: key.environment ?? "sandbox",
    kind: key.kind ?? "secret",
  });
  return {
    merchantId: merchant.body.merchant_id,
    profileId: merchant.body.default_profile_id,
    apiKey: issued.api_key,
    keyId: issued.key_id,
  };
}

/**
 * Issues another key for an existing merchant through the admin API (decisions §2): a sandbox key
 * unless `fields` say otherwise. Fails the test unless it is issued; returns the answer, the only
 * one that shows the key.
 */
export async function adminIssue(url: string, merchantId: string, fields: Record<string, unknown> = {}): Promise<JsonBody> {
  const res = await rest(url, "POST", "/api-keys", { admin: true, body: { merchant_id: merchantId, environment: "sandbox", ...fields } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

/**
 * Issues another key for an existing merchant, so a test can call as a production or publishable
 * caller, and returns the key. Without `kind` the request leaves it to the default.
 */
export async function issueKey(
  url: string,
  merchantId: string,
  environment: "sandbox" | "production",
  kind?: "secret" | "publishable",
): Promise<string> {
  return (await adminIssue(url, merchantId, kind === undefined ? { environment } : { environment, kind })).api_key;
}

/**
 * Changes the merchant's default profile as the operator does (name, return_url, webhook_url,
 * rotate_webhook_secret); fails the test unless it is changed, and returns the profile as answered.
 */
export async function updateProfile(url: string, merchant: TestMerchant, body: Record<string, unknown>): Promise<JsonBody> {
  const res = await rest(url, "POST", `/merchants/${merchant.merchantId}/profiles/${merchant.profileId}`, { admin: true, body });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}
