import { createHmac } from "node:crypto";
import { randomBase62 } from "../ids.js";

/**
 * A new webhook secret: "whsec_" and 32 base62 characters. Base62 is a subset of base64, so the same
 * secret also serves Standard Webhooks libraries, which take the part after "whsec_" as base64 key bytes.
 */
export function newWebhookSecret(): string {
  return `whsec_${randomBase62(32)}`;
}

/** The key bytes a Standard Webhooks receiver derives from a "whsec_…" secret. */
function standardKeyOf(secret: string): Buffer {
  return Buffer.from(secret.replace(/^whsec_/, ""), "base64");
}

/**
 * The signature headers of one delivery attempt, signed with each of `secrets` (the profile's secret,
 * then the one a rotation replaced while it is still honoured), so a receiver verifies with either:
 * - our own (decisions §8): `X-Webhook-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>[,v1=…]`;
 * - Standard Webhooks 1.0: `webhook-id` (the event id, the same on every attempt), `webhook-timestamp`
 *   and `webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>[ v1,…]`.
 */
export function signatureHeaders(eventId: string, body: string, secrets: readonly string[], unixSeconds: number): Record<string, string> {
  const ours = secrets.map((secret) => `v1=${createHmac("sha256", secret).update(`${unixSeconds}.${body}`).digest("hex")}`);
  const standard = secrets.map(
    (secret) => `v1,${createHmac("sha256", standardKeyOf(secret)).update(`${eventId}.${unixSeconds}.${body}`).digest("base64")}`,
  );
  return {
    "x-webhook-signature": [`t=${unixSeconds}`, ...ours].join(","),
    "webhook-id": eventId,
    "webhook-timestamp": String(unixSeconds),
    "webhook-signature": standard.join(" "),
  };
}
