import { describe, expect, it } from "vitest";
import { visaCard } from "./support/cards.js";
import { rest } from "./support/clients.js";
import { newMerchant } from "./support/merchant.js";
import { createPayment } from "./support/payments.js";
import { runningService } from "./support/running.js";

/*
 * Headers a payments API sends on every answer (docs/api-conventions.md, "Response headers"): no
 * cache may keep an answer, since answers carry client secrets, API keys and payments; no browser
 * sniffs a type other than the declared one; and the 3DS challenge page cannot be framed by another
 * site.
 */

const service = runningService();

/** The headers every answer of the port carries. */
function expectNotStoredNorSniffed(headers: Headers): void {
  expect(headers.get("cache-control")).toBe("no-store");
  expect(headers.get("x-content-type-options")).toBe("nosniff");
}

describe("response headers", () => {
  it("a payment's answer, which carries its client_secret, is never stored; nor is a refusal", async () => {
    const merchant = await newMerchant(service.url);
    const created = await rest(service.url, "POST", "/payments", {
      apiKey: merchant.apiKey,
      body: { amount: 1000, currency: "USD", profile_id: merchant.profileId },
    });
    expect(created.body.client_secret).toMatch(/_secret_/);
    expectNotStoredNorSniffed(created.headers);

    const refused = await rest(service.url, "GET", "/payments/list");
    expect(refused.status).toBe(401);
    expectNotStoredNorSniffed(refused.headers);

    const unknownPath = await rest(service.url, "GET", "/no/such/path");
    expect(unknownPath.status).toBe(404);
    expectNotStoredNorSniffed(unknownPath.headers);
  });

  it("a new API key's answer, which shows the key once, is never stored", async () => {
    const merchant = await newMerchant(service.url);
    const issued = await rest(service.url, "POST", "/api-keys", {
      admin: true,
      body: { merchant_id: merchant.merchantId, environment: "sandbox" },
    });
    expect(issued.body.api_key).toMatch(/^snd_/);
    expectNotStoredNorSniffed(issued.headers);
  });

  it("a Connect call's answer is never stored either", async () => {
    const merchant = await newMerchant(service.url);
    const res = await fetch(`${service.url}/paymentservice.v1.PaymentService/CreatePayment`, {
      method: "POST",
      headers: { "content-type": "application/json", "api-key": merchant.apiKey },
      body: JSON.stringify({ amount: 1000, currency: "USD", profileId: merchant.profileId }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { clientSecret: string }).clientSecret).toMatch(/_secret_/);
    expectNotStoredNorSniffed(res.headers);
  });

  it("the 3DS page may not be framed, runs no script and is never stored", async () => {
    const merchant = await newMerchant(service.url);
    const payment = await createPayment(service.url, merchant, {
      confirm: true,
      payment_method_data: { card: { ...visaCard, card_number: "4000000000003220" } },
    });
    expect(payment.status).toBe("requires_action");
    const res = await fetch(payment.next_action.redirect_to_url);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain("<button");
    expectNotStoredNorSniffed(res.headers);
    const policy = (res.headers.get("content-security-policy") ?? "").split(";").map((directive) => directive.trim());
    expect(policy).toEqual(expect.arrayContaining(["frame-ancestors 'none'", "default-src 'none'"]));
  });
});
