import { rest } from "./clients.js";

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
  const issued = await rest(baseUrl, "POST", "/api-keys", {
    admin: true,
    body: { merchant_id: merchant.body.merchant_id, environment: key.environment ?? "sandbox", kind: key.kind ?? "secret" },
  });
  if (issued.status !== 200) throw new Error(`issuing a key failed: ${JSON.stringify(issued.body)}`);
  return {
    merchantId: merchant.body.merchant_id,
    profileId: merchant.body.default_profile_id,
    apiKey: issued.body.api_key,
    keyId: issued.body.key_id,
  };
}
