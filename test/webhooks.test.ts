import { randomBytes } from "node:crypto";
import { Code } from "@connectrpc/connect";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { type Event, EventService } from "../gen/paymentservice/v1/event_pb.js";
import { MerchantService } from "../gen/paymentservice/v1/merchant_pb.js";
import { cardData } from "./support/cards.js";
import { type JsonBody, rest, rpcClient } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { expectRestError, expectRpcError } from "./support/errors.js";
import { issueKey, newMerchant, type TestMerchant, updateProfile } from "./support/merchant.js";
import { iso, type Json, protocols, uniqueId } from "./support/resource-api.js";
import { createPayment } from "./support/payments.js";
import { runningInstance } from "./support/running.js";
import { noPolling } from "./support/service.js";
import { sleep, waitUntil } from "./support/wait.js";
import { leaseMsFor, newLease } from "../src/webhooks/lease.js";
import {
  alwaysOk,
  closedPortUrl,
  deliveryAsRest,
  failFirst,
  parseSignatureHeader,
  type ReceivedRequest,
  standardHeaders,
  receiversPerTest,
  verifySignature,
  type WebhookReceiver,
} from "./support/webhook-receiver.js";

/*
 * Webhook delivery (docs/events.md, decisions §8), end to end: the service POSTs every event of a
 * profile with a webhook_url to a receiver started by the test on 127.0.0.1, signed so that both our
 * own X-Webhook-Signature check and a Standard Webhooks library verify it; failed attempts are
 * retried with backoff for 3 days, then the delivery is failed until redelivered.
 *
 * The service runs on a TestClock. Its dispatcher polls on its own, but with a clock that does not
 * move nothing is due before the test says so: a test makes an event, calls deliverDue() (which sends
 * everything due and waits until the outcomes are written), looks at the event's delivery state, and
 * moves the clock to the next attempt. Receivers are closed after each test, so a delivery an
 * earlier test left pending fails fast (connection refused) when a later test moves the clock.
 */

const second = 1000;
const hour = 3_600_000;
const day = 24 * hour;

/** Starts a receiver for the current test; it is closed after the test. */
const receiver = receiversPerTest();

/** The webhook-id header of each request, in arrival order. */
const ids = (r: WebhookReceiver) => r.requests.map((request) => request.headers["webhook-id"]);

describe("webhook delivery (in-process, on a TestClock)", () => {
  const clock = new TestClock();
  // One instance whatever the topology: the tests step this instance's dispatcher (deliverDue) on a
  // test clock and expect each attempt to be its own; other instances' dispatchers, polling in the
  // background, would take the same due deliveries. webhooks-concurrency.test.ts races instances.
  // Attempts wait a second for an answer rather than ten (WEBHOOK_ATTEMPT_TIMEOUT_MS), so a receiver
  // that never answers costs the suite that second.
  const attemptTimeoutMs = 1000;
  const service = runningInstance({ ...noPolling, WEBHOOK_ATTEMPT_TIMEOUT_MS: String(attemptTimeoutMs) }, clock);

  const deliverDue = () => service.app.webhooks.deliverDue();
  const now = () => clock.now().toISOString();

  /** A new merchant whose default profile sends its events to `url`; returns it with the profile as answered. */
  async function merchantSendingTo(url: string): Promise<{ merchant: TestMerchant; profile: JsonBody }> {
    const merchant = await newMerchant(service.url);
    const profile = await updateProfile(service.url, merchant, { webhook_url: url });
    expect(profile.webhook_url).toBe(url);
    return { merchant, profile };
  }

  /** A payment created without confirming it: one payment.requires_payment_method event. */
  async function onePaymentEvent(merchant: TestMerchant): Promise<string> {
    const payment = await createPayment(service.url, merchant);
    const events = await listEvents(merchant);
    const event = events.find((e) => e.data.object.payment_id === payment.payment_id);
    expect(event?.type).toBe("payment.requires_payment_method");
    return event.event_id;
  }

  async function retrieveEvent(merchant: TestMerchant, eventId: string, apiKey = merchant.apiKey): Promise<JsonBody> {
    const res = await rest(service.url, "GET", `/events/${eventId}`, { apiKey });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  }

  async function listEvents(merchant: TestMerchant): Promise<JsonBody[]> {
    const res = await rest(service.url, "GET", "/events/list?limit=100", { apiKey: merchant.apiKey });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.data;
  }

  const deliveryOf = async (merchant: TestMerchant, eventId: string) => (await retrieveEvent(merchant, eventId)).delivery;

  async function redeliver(merchant: TestMerchant, eventId: string, apiKey = merchant.apiKey): Promise<JsonBody> {
    const res = await rest(service.url, "POST", `/events/${eventId}/redeliver`, { apiKey, body: {} });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  }

  /** Checks that `at` lies `expected` ms ±20 % after the clock's now (the backoff's jitter). */
  function expectAfterNow(at: string, expected: number): void {
    const wait = Date.parse(at) - clock.now().getTime();
    expect(wait, `${at} is ${wait} ms after ${now()}`).toBeGreaterThanOrEqual(Math.floor(expected * 0.8));
    expect(wait, `${at} is ${wait} ms after ${now()}`).toBeLessThanOrEqual(Math.ceil(expected * 1.2));
  }

  /**
   * Delivers the (always failing) event's attempts one after another, moving the clock to each
   * next_attempt_at: ~10 s doubling (±20 %) up to 6 h, never past the 3 days after `created`, until
   * the delivery is no longer pending. Returns it then.
   */
  async function failThroughTheWindow(merchant: TestMerchant, eventId: string, created: number): Promise<JsonBody> {
    for (let attempt = 1; ; attempt++) {
      expect(attempt, "attempts before the delivery failed").toBeLessThan(40);
      await deliverDue();
      const delivery = await deliveryOf(merchant, eventId);
      expect(delivery).toMatchObject({ attempts: attempt, last_attempt_at: now() });
      if (delivery.status !== "pending") return delivery;
      expectAfterNow(delivery.next_attempt_at, Math.min(10 * second * 2 ** (attempt - 1), 6 * hour));
      expect(Date.parse(delivery.next_attempt_at)).toBeLessThanOrEqual(created + 3 * day);
      clock.advance(Date.parse(delivery.next_attempt_at) - clock.now().getTime());
    }
  }

  describe("a delivered event", () => {
    it("arrives as the event GET /events/:id answers minus delivery, signed for our check and for Standard Webhooks", async () => {
      const hooks = await receiver();
      const { merchant, profile } = await merchantSendingTo(hooks.url);
      const secret = profile.webhook_secret as string;
      // Not only ASCII: the signature is over the body's UTF-8 bytes, as sent.
      const payment = await createPayment(service.url, merchant, { description: "Café ☕ für Zoë — 🧾", metadata: { order: "ø-1" } });
      await rest(service.url, "POST", `/payments/${payment.payment_id}/confirm`, {
        apiKey: merchant.apiKey,
        body: { payment_method_data: cardData("4242424242424242", clock.now()) },
      });
      const deliveredAt = now();
      await deliverDue();

      const events = await listEvents(merchant);
      expect(events.map((e) => e.type)).toEqual(["payment.succeeded", "payment.requires_payment_method"]);
      expect(new Set(ids(hooks))).toEqual(new Set(events.map((e) => e.event_id)));
      expect(hooks.requests).toHaveLength(2);

      for (const request of hooks.requests) {
        const eventId = request.headers["webhook-id"] as string;
        const event = await retrieveEvent(merchant, eventId);
        expect(event.delivery).toEqual({
          status: "delivered",
          attempts: 1,
          last_response_status: 200,
          last_error: null,
          last_attempt_at: deliveredAt,
          next_attempt_at: null,
        });
        const { delivery: _, ...withoutDelivery } = event;
        expect(request.method).toBe("POST");
        expect(request.path).toBe("/hook");
        expect(request.headers["content-type"]).toBe("application/json");
        expect(JSON.parse(request.body)).toEqual(withoutDelivery);
        expect(request.body).not.toContain("delivery");

        // Our own header, checked the way docs/events.md tells receivers to: t is the real time, one v1 (no rotation).
        const header = request.headers["x-webhook-signature"] as string;
        const { t, v1 } = parseSignatureHeader(header);
        expect(v1).toHaveLength(1);
        expect(Math.abs(t - Date.now() / 1000)).toBeLessThan(60);
        expect(verifySignature(header, request.body, secret)).toBe(true);
        expect(verifySignature(header, request.body.replace(eventId, `${eventId}x`), secret)).toBe(false);
        expect(verifySignature(header, request.body, `${secret}x`)).toBe(false);

        // Standard Webhooks 1.0: webhook-id is the event id, webhook-timestamp our t, and the library verifies it.
        expect(request.headers["webhook-timestamp"]).toBe(String(t));
        expect(new Webhook(secret).verify(request.body, standardHeaders(request))).toEqual(withoutDelivery);
        expect(() => new Webhook(`whsec_${randomBytes(24).toString("base64")}`).verify(request.body, standardHeaders(request))).toThrow();
        expect(() => new Webhook(secret).verify(`${request.body} `, standardHeaders(request))).toThrow();
      }

      // Delivered means done: nothing more is sent, however far the clock moves.
      clock.advance(4 * day);
      await deliverDue();
      expect(hooks.requests).toHaveLength(2);
    });

    it("every kind of event (payment, refund, dispute, payout) goes to the webhook_url of its object's profile", async () => {
      const defaultHooks = await receiver();
      const shopHooks = await receiver();
      const { merchant } = await merchantSendingTo(defaultHooks.url);
      const shop = await rest(service.url, "POST", `/merchants/${merchant.merchantId}/profiles`, {
        admin: true,
        body: { profile_name: "shop", webhook_url: shopHooks.url },
      });
      expect(shop.status, JSON.stringify(shop.body)).toBe(200);
      const profileId = shop.body.profile_id as string;

      const payment = await createPayment(service.url, merchant, {
        profile_id: profileId,
        confirm: true,
        payment_method_data: cardData("4242424242424242", clock.now()),
      });
      expect(payment.status).toBe("succeeded");
      const refund = await rest(service.url, "POST", "/refunds", {
        apiKey: merchant.apiKey,
        body: { payment_id: payment.payment_id, amount: 100 },
      });
      expect(refund.status, JSON.stringify(refund.body)).toBe(200);
      const dispute = await rest(service.url, "POST", `/sandbox/payments/${payment.payment_id}/dispute`, { apiKey: merchant.apiKey });
      expect(dispute.status, JSON.stringify(dispute.body)).toBe(200);
      const payout = await rest(service.url, "POST", "/payouts/create", {
        apiKey: merchant.apiKey,
        body: {
          amount: 1000,
          currency: "USD",
          profile_id: profileId,
          payout_type: "card",
          payout_method_data: {
            card: { card_number: "4242424242424242", card_exp_month: "12", card_exp_year: String(clock.now().getUTCFullYear() + 3) },
          },
        },
      });
      expect(payout.status, JSON.stringify(payout.body)).toBe(200);
      // The refund and the payout finish in jobs (a runner woken by the create may hold one a moment): run them until both
      // have, and every event is delivered.
      const events = await waitUntil(
        async () => {
          await service.jobs.runDue();
          await deliverDue();
          return listEvents(merchant);
        },
        (list) =>
          ["refund.succeeded", "payout.success"].every((type) => list.some((e) => e.type === type)) &&
          list.every((e) => e.delivery.status === "delivered"),
      );
      const kinds = new Set(events.map((e) => (e.type as string).split(".")[0]));
      expect(kinds).toEqual(new Set(["payment", "refund", "dispute", "payout"]));
      expect(new Set(ids(shopHooks))).toEqual(new Set(events.map((e) => e.event_id)));
      expect(shopHooks.requests).toHaveLength(events.length);
      expect(defaultHooks.requests).toEqual([]);
      for (const event of events) expect(event.delivery, event.type).toMatchObject({ status: "delivered", attempts: 1 });
    });

    it("a setup's payment method and mandate events go to the setup's profile; a card saved by a secret key's call, to the default profile", async () => {
      const defaultHooks = await receiver();
      const shopHooks = await receiver();
      const { merchant } = await merchantSendingTo(defaultHooks.url);
      const shop = await rest(service.url, "POST", `/merchants/${merchant.merchantId}/profiles`, {
        admin: true,
        body: { profile_name: "shop", webhook_url: shopHooks.url },
      });
      expect(shop.status, JSON.stringify(shop.body)).toBe(200);
      const customer = await rest(service.url, "POST", "/customers", { apiKey: merchant.apiKey, body: {} });
      const setup = await createPayment(service.url, merchant, {
        amount: 0,
        profile_id: shop.body.profile_id,
        confirm: true,
        customer_id: customer.body.customer_id,
        setup_future_usage: "off_session",
        customer_acceptance: { acceptance_type: "offline" },
        payment_method_data: cardData("4242424242424242", clock.now()),
      });
      expect(setup.status).toBe("succeeded");
      const saved = await rest(service.url, "POST", "/payment_methods", {
        apiKey: merchant.apiKey,
        body: {
          payment_method: "card",
          customer_id: customer.body.customer_id,
          card: { card_number: "5555555555554444", card_exp_month: "12", card_exp_year: String(clock.now().getUTCFullYear() + 3) },
        },
      });
      expect(saved.status, JSON.stringify(saved.body)).toBe(200);
      clock.advance(second);
      const revoked = await rest(service.url, "POST", `/mandates/${setup.mandate_id}/revoke`, { apiKey: merchant.apiKey });
      expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
      await deliverDue();

      const typesTo = (hooks: WebhookReceiver) =>
        hooks.requests.map((request) => (JSON.parse(request.body) as { type: string }).type).sort();
      expect(typesTo(shopHooks)).toEqual(["mandate.active", "mandate.revoked", "payment.succeeded", "payment_method.attached"]);
      expect(typesTo(defaultHooks)).toEqual(["payment_method.attached"]);
      const attached = defaultHooks.requests.map(
        (request) => JSON.parse(request.body) as { data: { object: { payment_method_id: string } } },
      );
      expect(attached[0]!.data.object.payment_method_id).toBe(saved.body.payment_method_id);
    });

    it("an event of a profile without a webhook_url is sent nowhere and says no_webhook_url", async () => {
      const hooks = await receiver();
      const merchant = await newMerchant(service.url);
      const eventId = await onePaymentEvent(merchant);
      await deliverDue();
      expect((await deliveryOf(merchant, eventId)).status).toBe("no_webhook_url");
      expect(hooks.requests).toEqual([]);

      // Setting the webhook_url later sends later events only.
      await updateProfile(service.url, merchant, { webhook_url: hooks.url });
      const later = await onePaymentEvent(merchant);
      await deliverDue();
      expect(ids(hooks)).toEqual([later]);
      expect((await deliveryOf(merchant, eventId)).status).toBe("no_webhook_url");
    });
  });

  describe("a creation whose answer was lost", () => {
    it("gives back the delivery it may have committed under its lease once told, rather than leaving it leased until its lease ends", async () => {
      const r = await receiver();
      const merchant = await newMerchant(service.url);
      const eventId = await onePaymentEvent(merchant);
      await updateProfile(service.url, merchant, { webhook_url: r.url });
      // What a batched creation whose answer never came leaves: its delivery leased under the write's own lease.
      const lease = newLease(clock.now(), leaseMsFor(attemptTimeoutMs));
      await service.app.dataSource.query(
        `INSERT INTO webhook_deliveries (event_id, merchant_id, livemode, profile_id, status, attempts, window_attempts, next_attempt_at, deliver_until, created, leased_until)
         SELECT event_id, merchant_id, livemode, profile_id, 'pending', 0, 0, created, created + interval '3 days', created, $2 FROM events WHERE event_id = $1`,
        [eventId, lease],
      );
      await deliverDue();
      expect(ids(r)).toEqual([]);
      expect(await deliveryOf(merchant, eventId)).toMatchObject({ status: "pending", attempts: 0 });

      service.app.webhooks.abandon(lease);
      await waitUntil(
        async () => {
          await sleep(50);
          await deliverDue();
          return ids(r).length;
        },
        (sent) => sent > 0,
      );
      expect(ids(r)).toEqual([eventId]);
      expect(await deliveryOf(merchant, eventId)).toMatchObject({ status: "delivered", attempts: 1 });
    });
  });

  describe("failed attempts", () => {
    it("are retried after ~10 s, doubling (±20 %), until the receiver answers 2xx; every attempt carries the same webhook-id", async () => {
      const failures = 3;
      const hooks = await receiver(failFirst(failures, 503));
      const { merchant, profile } = await merchantSendingTo(hooks.url);
      const eventId = await onePaymentEvent(merchant);

      for (let attempt = 1; attempt <= failures; attempt++) {
        const attemptedAt = now();
        await deliverDue();
        expect(hooks.requests).toHaveLength(attempt);
        const delivery = await deliveryOf(merchant, eventId);
        expect(delivery).toEqual({
          status: "pending",
          attempts: attempt,
          last_response_status: 503,
          last_error: "the receiver answered HTTP 503",
          last_attempt_at: attemptedAt,
          next_attempt_at: expect.any(String),
        });
        expectAfterNow(delivery.next_attempt_at, 10 * second * 2 ** (attempt - 1));

        // Not a moment early: a millisecond before next_attempt_at nothing is due.
        clock.advance(Date.parse(delivery.next_attempt_at) - clock.now().getTime() - 1);
        await deliverDue();
        expect(hooks.requests).toHaveLength(attempt);
        clock.advance(1);
        expect(now()).toBe(delivery.next_attempt_at);
      }

      const succeededAt = now();
      await deliverDue();
      expect(await deliveryOf(merchant, eventId)).toEqual({
        status: "delivered",
        attempts: failures + 1,
        last_response_status: 200,
        last_error: null,
        last_attempt_at: succeededAt,
        next_attempt_at: null,
      });
      expect(ids(hooks)).toEqual(Array(failures + 1).fill(eventId));
      for (const request of hooks.requests) {
        expect(request.body).toBe(hooks.requests[0]!.body);
        expect(verifySignature(request.headers["x-webhook-signature"] as string, request.body, profile.webhook_secret)).toBe(true);
        expect(() => new Webhook(profile.webhook_secret).verify(request.body, standardHeaders(request))).not.toThrow();
      }
    });

    it("a receiver that never answers: the attempt ends after WEBHOOK_ATTEMPT_TIMEOUT_MS as 'no answer', and the delivery stays pending", async () => {
      const hooks = await receiver(() => ({ hold: true }));
      const { merchant } = await merchantSendingTo(hooks.url);
      const eventId = await onePaymentEvent(merchant);
      const attemptedAt = now();
      await deliverDue();
      expect(hooks.requests).toHaveLength(1);
      // The service hung up: nothing is held any more.
      await waitUntil(
        async () => hooks.held(),
        (held) => held === 0,
      );
      const delivery = await deliveryOf(merchant, eventId);
      expect(delivery).toEqual({
        status: "pending",
        attempts: 1,
        last_response_status: null,
        last_error: expect.stringContaining("no answer"),
        last_attempt_at: attemptedAt,
        next_attempt_at: expect.any(String),
      });
      expect(delivery.last_error).toBe("no answer within 1 s");
      expectAfterNow(delivery.next_attempt_at, 10 * second);
    });

    it("a receiver that refuses connections: 'connection refused', retried", async () => {
      const { merchant } = await merchantSendingTo(await closedPortUrl());
      const eventId = await onePaymentEvent(merchant);
      await deliverDue();
      const first = await deliveryOf(merchant, eventId);
      expect(first).toEqual({
        status: "pending",
        attempts: 1,
        last_response_status: null,
        last_error: "connection refused",
        last_attempt_at: now(),
        next_attempt_at: expect.any(String),
      });
      expectAfterNow(first.next_attempt_at, 10 * second);

      clock.advance(Date.parse(first.next_attempt_at) - clock.now().getTime());
      await deliverDue();
      const again = await deliveryOf(merchant, eventId);
      expect(again).toMatchObject({ status: "pending", attempts: 2, last_error: "connection refused", last_attempt_at: now() });
      expectAfterNow(again.next_attempt_at, 20 * second);
    });

    it("does not follow a redirect: the 302 is a failed attempt and the Location gets nothing", async () => {
      const elsewhere = await receiver();
      const hooks = await receiver(() => ({ status: 302, headers: { location: elsewhere.url } }));
      const { merchant } = await merchantSendingTo(hooks.url);
      const eventId = await onePaymentEvent(merchant);
      await deliverDue();
      expect(ids(hooks)).toEqual([eventId]);
      expect(elsewhere.requests).toEqual([]);
      expect(await deliveryOf(merchant, eventId)).toMatchObject({
        status: "pending",
        attempts: 1,
        last_response_status: 302,
        last_error: "the receiver answered HTTP 302",
      });
    });

    it("a delivery still failing after 3 days is failed; redeliver makes it pending again and delivers it once the receiver is back", async () => {
      const hooks = await receiver(() => ({ status: 500, body: "down" }));
      const { merchant } = await merchantSendingTo(hooks.url);
      const created = clock.now().getTime();
      const eventId = await onePaymentEvent(merchant);

      const delivery = await failThroughTheWindow(merchant, eventId, created);
      const attempts = delivery.attempts as number;
      expect(delivery).toEqual({
        status: "failed",
        attempts,
        last_response_status: 500,
        last_error: "the receiver answered HTTP 500",
        last_attempt_at: now(),
        next_attempt_at: null,
      });
      // The last attempt was as late as the window allowed: one more retry (at most 7.2 h later) would have ended past it.
      expect(clock.now().getTime()).toBeGreaterThan(created + 3 * day - 6 * hour * 1.2);
      expect(hooks.requests).toHaveLength(attempts);
      expect(new Set(ids(hooks))).toEqual(new Set([eventId]));

      // Failed stays failed.
      clock.advance(day);
      await deliverDue();
      expect(hooks.requests).toHaveLength(attempts);

      // The receiver is back; redeliver makes it due now, and it is delivered.
      hooks.answerWith(alwaysOk);
      const redelivered = await redeliver(merchant, eventId);
      expect(redelivered.delivery).toEqual({ ...delivery, status: "pending", next_attempt_at: now() });
      await deliverDue();
      expect(await deliveryOf(merchant, eventId)).toEqual({
        status: "delivered",
        attempts: attempts + 1,
        last_response_status: 200,
        last_error: null,
        last_attempt_at: now(),
        next_attempt_at: null,
      });
      expect(hooks.requests).toHaveLength(attempts + 1);
    });

    it("after a redelivery a failing receiver is retried like a new delivery: after ~10 s, not after the 6 h the old attempts reached", async () => {
      const hooks = await receiver(() => ({ status: 500 }));
      const { merchant } = await merchantSendingTo(hooks.url);
      const created = clock.now().getTime();
      const eventId = await onePaymentEvent(merchant);
      const failed = await failThroughTheWindow(merchant, eventId, created);
      expect(failed.status).toBe("failed");

      await redeliver(merchant, eventId);
      await deliverDue();
      const retried = await deliveryOf(merchant, eventId);
      expect(retried).toMatchObject({ status: "pending", attempts: failed.attempts + 1, last_attempt_at: now() });
      // proto: "due at once, then retried for 3 days like a new one".
      expectAfterNow(retried.next_attempt_at, 10 * second);
    });

    it("a redelivery while the last attempt of the old window is in flight: that attempt failing leaves it pending in the fresh window", async () => {
      // The first attempt fails; the second is held open until the test answers it.
      const hooks = await receiver((_request, index) => (index === 0 ? { status: 500 } : { hold: true }));
      const { merchant } = await merchantSendingTo(hooks.url);
      const eventId = await onePaymentEvent(merchant);
      await deliverDue();
      const pending = await deliveryOf(merchant, eventId);
      expect(pending).toMatchObject({ status: "pending", attempts: 1 });
      // Nothing is due now, so nothing is taken while the window is cut short: it ends a second after the
      // next attempt, which is therefore the last one it allows (another would come ~20 s later).
      const nextAttempt = Date.parse(pending.next_attempt_at);
      await service.app.dataSource.query("UPDATE webhook_deliveries SET deliver_until = $2 WHERE event_id = $1", [
        eventId,
        new Date(nextAttempt + second),
      ]);
      clock.advance(nextAttempt - clock.now().getTime());
      const sending = deliverDue();
      await waitUntil(
        () => sleep(10).then(() => hooks.held()),
        (held) => held === 1,
      );
      const redelivered = await redeliver(merchant, eventId);
      expect(redelivered.delivery).toMatchObject({ status: "pending", attempts: 1, next_attempt_at: now() });

      hooks.release(500);
      await sending;
      // The in-flight attempt's outcome stands for the redelivery (src/events/service.ts), but its window is the fresh one.
      const delivery = await deliveryOf(merchant, eventId);
      expect(delivery).toMatchObject({ status: "pending", attempts: 2, last_response_status: 500 });
      expect(delivery.next_attempt_at).not.toBeNull();
    });

    it("a pending delivery whose profile loses its webhook_url fails without an attempt, and cannot be redelivered", async () => {
      const hooks = await receiver(() => ({ status: 500 }));
      const { merchant } = await merchantSendingTo(hooks.url);
      const eventId = await onePaymentEvent(merchant);
      const attemptedAt = now();
      await deliverDue();
      const pending = await deliveryOf(merchant, eventId);
      expect(pending).toMatchObject({ status: "pending", attempts: 1, last_response_status: 500 });

      await updateProfile(service.url, merchant, { webhook_url: "" });
      clock.advance(Date.parse(pending.next_attempt_at) - clock.now().getTime());
      await deliverDue();
      expect(hooks.requests).toHaveLength(1);
      // No attempt was made: attempts, last_response_status and last_attempt_at still describe the one that was.
      expect(await deliveryOf(merchant, eventId)).toEqual({
        status: "failed",
        attempts: 1,
        last_response_status: 500,
        last_error: "the profile no longer has a webhook_url",
        last_attempt_at: attemptedAt,
        next_attempt_at: null,
      });
      const refused = await rest(service.url, "POST", `/events/${eventId}/redeliver`, { apiKey: merchant.apiKey, body: {} });
      expect(expectRestError(refused, 400, "IR_16")).toContain("webhook_url");
    });
  });

  describe("answers", () => {
    it("a huge answer body (several MB with 200) is read only in part and the event is delivered", async () => {
      const hooks = await receiver(() => ({ stream: 8 * 1024 * 1024 }));
      const { merchant } = await merchantSendingTo(hooks.url);
      const eventId = await onePaymentEvent(merchant);
      await deliverDue();
      expect(ids(hooks)).toEqual([eventId]);
      expect(await deliveryOf(merchant, eventId)).toMatchObject({ status: "delivered", attempts: 1, last_response_status: 200 });
      // The service still answers and still delivers.
      const next = await onePaymentEvent(merchant);
      await deliverDue();
      expect(ids(hooks)).toEqual([eventId, next]);
    });

    it.each([200, 201, 202, 204, 299])("a %i answer delivers", async (status) => {
      const hooks = await receiver(() => ({ status }));
      const { merchant } = await merchantSendingTo(hooks.url);
      const eventId = await onePaymentEvent(merchant);
      await deliverDue();
      expect(await deliveryOf(merchant, eventId)).toMatchObject({ status: "delivered", last_response_status: status, last_error: null });
    });

    it.each([301, 400, 401, 404, 410, 500, 502])("a %i answer is a failed attempt", async (status) => {
      const hooks = await receiver(() => ({ status }));
      const { merchant } = await merchantSendingTo(hooks.url);
      const eventId = await onePaymentEvent(merchant);
      await deliverDue();
      expect(await deliveryOf(merchant, eventId)).toMatchObject({
        status: "pending",
        attempts: 1,
        last_response_status: status,
        last_error: `the receiver answered HTTP ${status}`,
      });
    });
  });

  describe("secret rotation", () => {
    /** Whether a request verifies with `secret`, by our header and by Standard Webhooks; both must agree. */
    function verifiesWith(request: ReceivedRequest, secret: string): boolean {
      const ours = verifySignature(request.headers["x-webhook-signature"] as string, request.body, secret);
      let standard = true;
      try {
        new Webhook(secret).verify(request.body, standardHeaders(request));
      } catch {
        standard = false;
      }
      expect(standard, "Standard Webhooks agrees with our header").toBe(ours);
      return ours;
    }

    const signatureCounts = (request: ReceivedRequest) => [
      parseSignatureHeader(request.headers["x-webhook-signature"] as string).v1.length,
      (request.headers["webhook-signature"] as string).split(" ").length,
    ];

    it("signs with the new and the old secret for 24 hours, then with the new one only", async () => {
      const hooks = await receiver();
      const { merchant, profile } = await merchantSendingTo(hooks.url);
      const old = profile.webhook_secret as string;
      expect(profile.previous_webhook_secret_expires_at).toBeNull();

      const rotatedAt = clock.now().getTime();
      const rotated = await updateProfile(service.url, merchant, { rotate_webhook_secret: true });
      expect(rotated).toEqual({
        ...profile,
        webhook_secret: expect.stringMatching(/^whsec_[0-9A-Za-z]{32}$/),
        previous_webhook_secret_expires_at: new Date(rotatedAt + day).toISOString(),
      });
      const fresh = rotated.webhook_secret as string;
      expect(fresh).not.toBe(old);
      const path = `/merchants/${merchant.merchantId}/profiles/${merchant.profileId}`;
      expect((await rest(service.url, "GET", path, { admin: true })).body).toEqual(rotated);

      const during = await onePaymentEvent(merchant);
      await deliverDue();
      const [both] = hooks.requests;
      expect(both!.headers["webhook-id"]).toBe(during);
      expect(signatureCounts(both!)).toEqual([2, 2]);
      expect(verifiesWith(both!, old)).toBe(true);
      expect(verifiesWith(both!, fresh)).toBe(true);
      expect(verifiesWith(both!, (await newMerchantSecret()) as string)).toBe(false);

      // A second before the 24 hours end, still both.
      clock.advance(day - second);
      await onePaymentEvent(merchant);
      await deliverDue();
      expect(signatureCounts(hooks.requests[1]!)).toEqual([2, 2]);
      expect(verifiesWith(hooks.requests[1]!, old)).toBe(true);

      // Past them, the new secret only.
      clock.advance(2 * second);
      const after = await onePaymentEvent(merchant);
      await deliverDue();
      const last = hooks.requests[2]!;
      expect(last.headers["webhook-id"]).toBe(after);
      expect(signatureCounts(last)).toEqual([1, 1]);
      expect(verifiesWith(last, fresh)).toBe(true);
      expect(verifiesWith(last, old)).toBe(false);
    });

    it("a retry after the rotation is signed with the secrets of its own attempt", async () => {
      const hooks = await receiver(failFirst(1));
      const { merchant, profile } = await merchantSendingTo(hooks.url);
      const eventId = await onePaymentEvent(merchant);
      await deliverDue();
      expect(signatureCounts(hooks.requests[0]!)).toEqual([1, 1]);
      const rotated = await updateProfile(service.url, merchant, { rotate_webhook_secret: true });
      clock.advance(Date.parse((await deliveryOf(merchant, eventId)).next_attempt_at) - clock.now().getTime());
      await deliverDue();
      const retry = hooks.requests[1]!;
      expect(signatureCounts(retry)).toEqual([2, 2]);
      expect(verifiesWith(retry, rotated.webhook_secret)).toBe(true);
      expect(verifiesWith(retry, profile.webhook_secret)).toBe(true);
    });

    it("a second rotation keeps only the secret it replaced as the old one", async () => {
      const hooks = await receiver();
      const { merchant, profile } = await merchantSendingTo(hooks.url);
      const first = await updateProfile(service.url, merchant, { rotate_webhook_secret: true });
      clock.advance(hour);
      const secondRotation = await updateProfile(service.url, merchant, { rotate_webhook_secret: true });
      expect(secondRotation.previous_webhook_secret_expires_at).toBe(new Date(clock.now().getTime() + day).toISOString());
      await onePaymentEvent(merchant);
      await deliverDue();
      const [request] = hooks.requests;
      expect(verifiesWith(request!, secondRotation.webhook_secret)).toBe(true);
      expect(verifiesWith(request!, first.webhook_secret)).toBe(true);
      expect(verifiesWith(request!, profile.webhook_secret)).toBe(false);
    });

    it.each(["connect", "grpc"] as const)("rotates over %s too, with the same answer as REST", async (protocol) => {
      const merchant = await newMerchant(service.url);
      const admin = rpcClient(MerchantService, service.url, protocol, { admin: true });
      const before = await admin.retrieveProfile({ merchantId: merchant.merchantId, profileId: merchant.profileId });
      expect(before.previousWebhookSecretExpiresAt).toBeUndefined();
      const rotated = await admin.updateProfile({
        merchantId: merchant.merchantId,
        profileId: merchant.profileId,
        rotateWebhookSecret: true,
      });
      expect(rotated.webhookSecret).not.toBe(before.webhookSecret);
      expect(iso(rotated.previousWebhookSecretExpiresAt)).toBe(new Date(clock.now().getTime() + day).toISOString());
      const path = `/merchants/${merchant.merchantId}/profiles/${merchant.profileId}`;
      expect((await rest(service.url, "GET", path, { admin: true })).body).toMatchObject({
        webhook_secret: rotated.webhookSecret,
        previous_webhook_secret_expires_at: iso(rotated.previousWebhookSecretExpiresAt),
      });
      // rotate_webhook_secret false (or absent) changes nothing.
      const kept = await admin.updateProfile({
        merchantId: merchant.merchantId,
        profileId: merchant.profileId,
        rotateWebhookSecret: false,
      });
      expect(kept.webhookSecret).toBe(rotated.webhookSecret);
    });

    /** Some other profile's secret: a valid secret that is not this profile's. */
    async function newMerchantSecret(): Promise<string> {
      const other = await newMerchant(service.url);
      const path = `/merchants/${other.merchantId}/profiles/${other.profileId}`;
      return (await rest(service.url, "GET", path, { admin: true })).body.webhook_secret;
    }
  });

  describe("where a webhook_url may point", () => {
    const refused = [
      "http://169.254.169.254/",
      "http://[fe80::1]/",
      "http://169.254.169.254/latest/meta-data/iam",
      "http://[::ffff:169.254.169.254]/",
    ];

    it.each(refused)("%s is 400 IR_05 naming webhook_url, on create and on update; the profile is unchanged", async (url) => {
      const merchant = await newMerchant(service.url);
      const base = `/merchants/${merchant.merchantId}/profiles`;
      const onCreate = await rest(service.url, "POST", base, { admin: true, body: { webhook_url: url } });
      expect(expectRestError(onCreate, 400, "IR_05")).toContain("webhook_url");

      const path = `${base}/${merchant.profileId}`;
      const before = (await rest(service.url, "GET", path, { admin: true })).body;
      const onUpdate = await rest(service.url, "POST", path, { admin: true, body: { webhook_url: url, profile_name: "renamed" } });
      expect(expectRestError(onUpdate, 400, "IR_05")).toContain("webhook_url");
      expect((await rest(service.url, "GET", path, { admin: true })).body).toEqual(before);

      const message = await expectRpcError(
        rpcClient(MerchantService, service.url, "grpc", { admin: true }).updateProfile({
          merchantId: merchant.merchantId,
          profileId: merchant.profileId,
          webhookUrl: url,
        }),
        Code.InvalidArgument,
        "IR_05",
      );
      expect(message).toContain("webhook_url");
    });

    it("http://localhost:1234/x is accepted on create and on update (a sandbox receiver on a laptop)", async () => {
      const merchant = await newMerchant(service.url);
      const base = `/merchants/${merchant.merchantId}/profiles`;
      const created = await rest(service.url, "POST", base, { admin: true, body: { webhook_url: "http://localhost:1234/x" } });
      expect(created.status, JSON.stringify(created.body)).toBe(200);
      expect(created.body.webhook_url).toBe("http://localhost:1234/x");
      expect((await updateProfile(service.url, merchant, { webhook_url: "http://localhost:1234/x" })).webhook_url).toBe(
        "http://localhost:1234/x",
      );
    });

    it("a production event is never sent over http nor to a name that resolves to a loopback address", async () => {
      const hooks = await receiver();
      const { merchant } = await merchantSendingTo(hooks.url);
      const productionKey = await issueKey(service.url, merchant.merchantId, "production");
      // No production processor exists yet, so nothing written through the API is a production event:
      // this one is written to the database directly, with its delivery, as the event's statement would.
      const eventId = uniqueId("evt");
      const created = clock.now();
      await service.app.dataSource.query(
        `INSERT INTO events (event_id, merchant_id, livemode, type, object_id, profile_id, data, created)
         VALUES ($1, $2, true, 'payment.requires_payment_method', 'pay_live', $3, $4, $5)`,
        [eventId, merchant.merchantId, merchant.profileId, JSON.stringify({ object: { payment_id: "pay_live" } }), created],
      );
      await service.app.dataSource.query(
        `INSERT INTO webhook_deliveries (event_id, merchant_id, livemode, profile_id, status, attempts, next_attempt_at, deliver_until, created)
         VALUES ($1, $2, true, $3, 'pending', 0, $4, $5, $4)`,
        [eventId, merchant.merchantId, merchant.profileId, created, new Date(created.getTime() + 3 * day)],
      );
      await deliverDue();
      expect(hooks.requests).toEqual([]);
      expect((await retrieveEvent(merchant, eventId, productionKey)).delivery).toEqual({
        status: "pending",
        attempts: 1,
        last_response_status: null,
        last_error: "production events go to https URLs only",
        last_attempt_at: now(),
        next_attempt_at: expect.any(String),
      });

      // https, but to localhost: refused when the name resolves, before any connection.
      await updateProfile(service.url, merchant, { webhook_url: hooks.url.replace("http://127.0.0.1", "https://localhost") });
      await redeliver(merchant, eventId, productionKey);
      await deliverDue();
      expect(hooks.requests).toEqual([]);
      const delivery = (await retrieveEvent(merchant, eventId, productionKey)).delivery;
      expect(delivery).toMatchObject({ status: "pending", attempts: 2, last_response_status: null });
      expect(delivery.last_error).toContain("not a public address");

      // The same profile's sandbox events still go to the very same receiver.
      await updateProfile(service.url, merchant, { webhook_url: hooks.url });
      const sandboxEvent = await onePaymentEvent(merchant);
      await deliverDue();
      expect(ids(hooks)).toEqual([sandboxEvent]);
    });
  });

  describe("delivery state over every protocol", () => {
    /** An event from an RPC answer under the REST field names. */
    const asRest = (e: Event): Json => ({
      event_id: e.eventId,
      type: e.type,
      created: iso(e.created),
      data: e.data === undefined ? null : { object: e.data.object ?? null },
      delivery: deliveryAsRest(e.delivery),
    });

    it("retrieve and list show the same delivery fields over REST, Connect, gRPC and gRPC-Web", async () => {
      const hooks = await receiver((request) => (request.body.includes('"amount":1,') ? { status: 500 } : { status: 200 }));
      const merchant = await newMerchant(service.url);
      clock.tick();
      // One event before the webhook_url: no_webhook_url; one delivered; one retried twice and pending.
      await createPayment(service.url, merchant, { amount: 3 });
      await updateProfile(service.url, merchant, { webhook_url: hooks.url });
      clock.tick();
      await createPayment(service.url, merchant, { amount: 2 });
      await createPayment(service.url, merchant, { amount: 1 });
      await deliverDue();
      clock.advance(30 * second);
      await deliverDue();

      const listed = await listEvents(merchant);
      expect(listed.map((e) => [e.data.object.amount, e.delivery.status, e.delivery.attempts])).toEqual([
        [1, "pending", 2],
        [2, "delivered", 1],
        [3, "no_webhook_url", 0],
      ]);
      const failing = listed[0]!;
      expect(failing.delivery).toEqual({
        status: "pending",
        attempts: 2,
        last_response_status: 500,
        last_error: "the receiver answered HTTP 500",
        last_attempt_at: now(),
        next_attempt_at: expect.any(String),
      });

      for (const protocol of protocols) {
        if (protocol === "rest") {
          for (const event of listed) expect(await retrieveEvent(merchant, event.event_id)).toEqual(event);
          continue;
        }
        const client = rpcClient(EventService, service.url, protocol, { apiKey: merchant.apiKey });
        const page = await client.listEvents({ limit: 100 });
        expect(page.data.map(asRest), protocol).toEqual(listed);
        for (const event of listed) expect(asRest(await client.retrieveEvent({ eventId: event.event_id })), protocol).toEqual(event);
      }

      // Redeliver answers the event with its delivery due now, over each protocol.
      for (const protocol of protocols) {
        await deliverDue();
        const before = await retrieveEvent(merchant, failing.event_id);
        clock.tick();
        const redelivered =
          protocol === "rest"
            ? await redeliver(merchant, failing.event_id)
            : asRest(
                await rpcClient(EventService, service.url, protocol, { apiKey: merchant.apiKey }).redeliverEvent({
                  eventId: failing.event_id,
                }),
              );
        expect(redelivered, protocol).toEqual({ ...before, delivery: { ...before.delivery, next_attempt_at: now() } });
      }
    });
  });
});
