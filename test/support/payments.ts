import { expect } from "vitest";
import { rest, type JsonBody } from "./clients.js";
import type { TestMerchant } from "./merchant.js";

/*
 * Payments made over REST to set the scene for another API under test (refunds, disputes, races,
 * the 3DS page): each call fails the test unless the service answers 200, with the body as message.
 */

/** Creates a payment of 5000 USD on the merchant's default profile, or what `body` says instead; returns it. */
export async function createPayment(url: string, merchant: TestMerchant, body: Record<string, unknown> = {}): Promise<JsonBody> {
  const res = await rest(url, "POST", "/payments", {
    apiKey: merchant.apiKey,
    body: { amount: 5000, currency: "USD", profile_id: merchant.profileId, ...body },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

/** Retrieves a payment, to see what another call did to it. */
export async function retrievePayment(url: string, merchant: TestMerchant, paymentId: string): Promise<JsonBody> {
  const res = await rest(url, "GET", `/payments/${paymentId}`, { apiKey: merchant.apiKey });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}
