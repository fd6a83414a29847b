import { describe, expect, it } from "vitest";
import { cardData } from "../support/cards.js";
import { rest } from "../support/clients.js";
import { serverProcessDatabase } from "../support/database.js";
import { newMerchant } from "../support/merchant.js";
import { createPayment } from "../support/payments.js";
import type { Json } from "../support/resource-api.js";
import { spawnServer } from "../support/server-process.js";
import { sleep, waitUntil } from "../support/wait.js";
import { receiversPerTest } from "../support/webhook-receiver.js";

/*
 * A profile's webhook secret, in a server process as `npm start` runs it (the system tier): through
 * deliveries, failed attempts and a rotation it appears in no log line, no event and no webhook
 * request. Delivery itself is test/webhooks.test.ts's subject.
 */

/** Starts a receiver for the current test; it is closed after the test. */
const receiver = receiversPerTest();

describe("the webhook secret in a server process", () => {
  it("never appears in the server's log nor in any event, through deliveries, failures and a rotation", { timeout: 60_000 }, async () => {
    const server = await spawnServer(await serverProcessDatabase());
    const secrets: string[] = [];
    let events: string;
    let bodies: string;
    try {
      const hooks = await receiver();
      const failing = await receiver(() => ({ status: 500, body: "no" }));
      const merchant = await newMerchant(server.url);
      const profilePath = `/merchants/${merchant.merchantId}/profiles/${merchant.profileId}`;
      const set = async (body: Json) => {
        const res = await rest(server.url, "POST", profilePath, { admin: true, body });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        secrets.push(res.body.webhook_secret);
        return res.body;
      };
      await set({ webhook_url: hooks.url });
      // A refused webhook_url is logged as the failed request it is.
      expect((await rest(server.url, "POST", profilePath, { admin: true, body: { webhook_url: "http://169.254.169.254/" } })).status).toBe(
        400,
      );
      for (let i = 0; i < 3; i++) {
        await createPayment(server.url, merchant, { confirm: true, payment_method_data: cardData("4242424242424242", new Date()) });
      }
      await set({ rotate_webhook_secret: true });
      await createPayment(server.url, merchant);
      const listEvents = () => rest(server.url, "GET", "/events/list?limit=100", { apiKey: merchant.apiKey });
      const sent = (await listEvents()).body.total_count as number;
      expect(sent).toBeGreaterThanOrEqual(4);
      // The dispatcher reads the webhook_url when it sends: every event so far goes to `hooks` before it changes.
      await waitUntil(
        () => sleep(50).then(() => hooks.requests.length),
        (n) => n >= sent,
      );
      await set({ webhook_url: failing.url });
      await createPayment(server.url, merchant);
      await waitUntil(
        () => sleep(50).then(() => failing.requests.length),
        (n) => n >= 1,
      );
      const list = await listEvents();
      expect(list.body.total_count).toBe(sent + 1);
      events = list.text;
      bodies = [...hooks.requests, ...failing.requests].map((r) => JSON.stringify(r)).join("\n");
    } finally {
      await server.stop();
    }
    const log = server.output();
    expect(log).toContain('"message":"listening"');
    expect(new Set(secrets).size).toBe(2);
    for (const secret of secrets) {
      const key = secret.replace(/^whsec_/, "");
      for (const [where, text] of [
        ["log", log],
        ["events", events],
        ["webhook requests", bodies],
      ] as const) {
        expect(text.includes(key), `${where} shows ${secret}`).toBe(false);
      }
    }
  });
});
