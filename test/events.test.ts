import { describe, expect, it } from "vitest";
import { EventService } from "../gen/paymentservice/v1/event_pb.js";
import { cardData } from "./support/cards.js";
import { rest, rpcClient } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { expectRestError } from "./support/errors.js";
import { eventsOf } from "./support/events.js";
import { issueKey, newMerchant, type TestMerchant, updateProfile } from "./support/merchant.js";
import { expectError, type Json, restCaller, restList, uniqueId } from "./support/resource-api.js";
import { createPayment, retrievePayment } from "./support/payments.js";
import { runningInstance } from "./support/running.js";
import { noPolling } from "./support/service.js";
import { waitUntil } from "./support/wait.js";
import { noWebhookUrl, startReceiver } from "./support/webhook-receiver.js";

/*
 * The events API (proto/paymentservice/v1/event.proto; decisions §7 lists, §8 events): retrieve an
 * event, list events newest first with the type and object_id filters, redeliver one, each scenario
 * once, over REST. Every event shows its webhook delivery state (`delivery`; delivery itself is
 * test/webhooks.test.ts's subject): no_webhook_url unless the test gives the profile a webhook_url, a
 * local receiver's. Each scenario talks to a small EventApi that sends the documented JSON; that every
 * RPC carries the same request and answer over Connect, gRPC and gRPC-Web is the protocol-parity
 * suite's subject (test/parity), and what only an RPC caller can send is tested over Connect at the
 * end. The events themselves come from payments and refunds made over REST, which only set the scene.
 *
 * The service runs on a TestClock with the background job poll out of reach (the webhook dispatcher
 * still polls, but nothing is due before the clock says so): an event's `created` is the clock's
 * reading when it was written, so a test that does not tick writes all its events in one instant,
 * and their order must then come from the order they were written in (events.seq).
 */

const clock = new TestClock();
// One instance whatever the topology: the redelivery tests step this instance's webhook dispatcher
// (deliverDue) on the test clock; other instances' dispatchers, polling in the background, would take
// the same deliveries. Event streams across instances are events-stream.test.ts's.
const service = runningInstance(noPolling, clock);

/** The event operations, as seen by a caller; results use the REST field names. */
interface EventApi {
  retrieve(eventId: string): Promise<Json>;
  list(params: Json): Promise<Json>;
  redeliver(eventId: string): Promise<Json>;
}

function restApi(apiKey: string, listWith: "GET" | "POST" = "POST"): EventApi {
  const call = restCaller(service.url, apiKey);
  const at = (id: string) => `/events/${encodeURIComponent(id)}`;
  return {
    retrieve: (id) => call("GET", at(id)),
    list: restList(call, listWith, "/events/list"),
    redeliver: (id) => call("POST", `${at(id)}/redeliver`),
  };
}

/** A fresh merchant (sandbox secret key) and its EventApi, so each scenario works in a merchant of its own. */
async function merchantApi(listWith: "GET" | "POST" = "POST"): Promise<{ merchant: TestMerchant; api: EventApi }> {
  const merchant = await newMerchant(service.url);
  return { merchant, api: restApi(merchant.apiKey, listWith) };
}

const visa = "4242424242424242";
const declined = "4000000000000002";

const empty = { data: [], total_count: 0, has_more: false };

/** Card fields for a payment request, expiring after the service's clock. */
const card = (number: string): Json => cardData(number, clock.now());

/** Confirms a payment over REST with `cardNumber`; returns the payment as answered. */
async function confirm(merchant: TestMerchant, paymentId: string, cardNumber = visa): Promise<Json> {
  const res = await rest(service.url, "POST", `/payments/${paymentId}/confirm`, {
    apiKey: merchant.apiKey,
    body: { payment_method_data: card(cardNumber) },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

/** Cancels a payment over REST; returns the payment as answered. */
async function cancel(merchant: TestMerchant, paymentId: string): Promise<Json> {
  const res = await rest(service.url, "POST", `/payments/${paymentId}/cancel`, { apiKey: merchant.apiKey, body: {} });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

/** A succeeded 4242 payment of `amount` USD; its id. */
async function paidPayment(merchant: TestMerchant, amount: number): Promise<string> {
  const payment = await createPayment(service.url, merchant, { amount, confirm: true, payment_method_data: card(visa) });
  expect(payment.status).toBe("succeeded");
  return payment.payment_id as string;
}

/**
 * Creates an instant refund over REST and waits for it to leave pending: runs due jobs (the runner
 * woken by the create may hold the job at that moment) and retrieves it, a bounded number of times.
 * Returns the refund as created and as settled.
 */
async function settledRefund(merchant: TestMerchant, paymentId: string, amount: number): Promise<{ created: Json; done: Json }> {
  const created = await rest(service.url, "POST", "/refunds", { apiKey: merchant.apiKey, body: { payment_id: paymentId, amount } });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const done = await waitUntil(
    async () => {
      await service.jobs.runDue();
      return (await rest(service.url, "GET", `/refunds/${created.body.refund_id}`, { apiKey: merchant.apiKey })).body as Json;
    },
    (refund) => refund.status !== "pending",
  );
  return { created: created.body, done };
}

/** What an event is about, as "<type> <object id>": the object's id is its `<resource>_id` field. */
function about(event: Json): string {
  const type = event.type as string;
  const object = (event.data as Json).object as Json;
  return `${type} ${object[`${type.split(".")[0]}_id`]}`;
}

const abouts = (list: Json) => (list.data as Json[]).map(about);

/**
 * Every page of a list `limit` at a time, following offset until has_more is false; checks each
 * page's total_count and has_more on the way. Returns the events in the order the pages gave them.
 */
async function allPages(api: EventApi, params: Json, limit: number): Promise<Json[]> {
  const events: Json[] = [];
  let total: number | undefined;
  for (let offset = 0; ; offset += limit) {
    const page = await api.list({ ...params, limit, offset });
    total ??= page.total_count as number;
    const data = page.data as Json[];
    expect(page, `page at offset ${offset}`).toEqual({ data, total_count: total, has_more: offset + data.length < total });
    expect(data).toHaveLength(Math.min(limit, Math.max(0, total - offset)));
    events.push(...data);
    if (!page.has_more) return events;
  }
}

/** One event as a list of the merchant answers it, whatever its position. */
async function onlyEvent(api: EventApi, params: Json = {}): Promise<Json> {
  const page = await api.list(params);
  expect(page).toMatchObject({ total_count: 1, has_more: false });
  return (page.data as Json[])[0]!;
}

describe("events", () => {
  describe("retrieve", () => {
    it("an event from the list retrieves to the same event: event_id, type, created and the object", async () => {
      const { merchant, api } = await merchantApi();
      const createdAt = clock.tick();
      const payment = await createPayment(service.url, merchant, { description: "Blue mug", metadata: { order: "7" } });
      const event = await onlyEvent(api);
      expect(event).toEqual({
        event_id: expect.stringMatching(/^evt_[0-9A-Za-z]+$/),
        type: "payment.requires_payment_method",
        created: createdAt,
        data: { object: payment },
        delivery: noWebhookUrl,
      });
      expect(await api.retrieve(event.event_id as string)).toEqual(event);

      clock.tick();
      await confirm(merchant, payment.payment_id as string);
      const list = await api.list({});
      expect(list.total_count).toBe(2);
      for (const listed of list.data as Json[]) expect(await api.retrieve(listed.event_id as string)).toEqual(listed);
    });

    it("another merchant's event and an unknown id are 404 HE_02 naming the id", async () => {
      const owner = await merchantApi();
      await createPayment(service.url, owner.merchant);
      const eventId = (await onlyEvent(owner.api)).event_id as string;

      const stranger = await merchantApi();
      expect(await expectError(stranger.api.retrieve(eventId), "HE_02", eventId)).toBe(`Event not found: ${eventId}`);
      expect(await stranger.api.list({})).toEqual(empty);
      await expectError(owner.api.retrieve("evt_missing"), "HE_02", "evt_missing");
      await expectError(owner.api.retrieve(uniqueId("evt")), "HE_02");
      // The owner still sees it.
      expect((await owner.api.retrieve(eventId)).event_id).toBe(eventId);
    });

    it("an empty id is no path (404 IR_02 naming /events/), not an event called ''", async () => {
      const { api } = await merchantApi();
      await expectError(api.retrieve(""), "IR_02", "/events/");
    });
  });

  describe("data.object", () => {
    it("is the object as retrieve returned it at that moment: the creation event still says requires_payment_method after it succeeds", async () => {
      const { merchant, api } = await merchantApi();
      clock.tick();
      const created = await createPayment(service.url, merchant, { amount: 4200, metadata: { order: "42" }, email: "ada@example.com" });
      const paymentId = created.payment_id as string;
      const retrievedThen = await retrievePayment(service.url, merchant, paymentId);
      expect(retrievedThen.status).toBe("requires_payment_method");

      const confirmedAt = clock.tick();
      expect((await confirm(merchant, paymentId)).status).toBe("succeeded");
      const retrievedNow = await retrievePayment(service.url, merchant, paymentId);

      const page = await api.list({ object_id: paymentId });
      expect((page.data as Json[]).map((e) => e.type)).toEqual(["payment.succeeded", "payment.requires_payment_method"]);
      const [later, first] = page.data as [Json, Json];

      // The first event holds what retrieve answered right after creation, field by field.
      const snapshot = (first.data as Json).object as Json;
      expect(Object.keys(snapshot).sort()).toEqual(Object.keys(retrievedThen).sort());
      for (const [field, value] of Object.entries(retrievedThen)) expect(snapshot[field], field).toEqual(value);
      expect(snapshot.status).toBe("requires_payment_method");
      expect(snapshot).not.toEqual(retrievedNow);

      // The later one holds the payment as it is now.
      expect(later).toEqual({
        event_id: expect.stringMatching(/^evt_/),
        type: "payment.succeeded",
        created: confirmedAt,
        data: { object: retrievedNow },
        delivery: noWebhookUrl,
      });
      expect(((later.data as Json).object as Json).status).toBe("succeeded");

      // Retrieve answers the same snapshots, and they are what the service stored.
      expect(await api.retrieve(first.event_id as string)).toEqual(first);
      expect(await api.retrieve(later.event_id as string)).toEqual(later);
      expect(await eventsOf(service, merchant.merchantId, paymentId)).toEqual([
        { type: "payment.requires_payment_method", object: retrievedThen },
        { type: "payment.succeeded", object: retrievedNow },
      ]);
    });
  });

  describe("events of one instant", () => {
    it("list in the order they happened: each instant refund's refund.succeeded before its refund.pending, on every page", async () => {
      const { merchant, api } = await merchantApi();
      const instant = clock.tick();
      // No tick from here on: the payment, the refunds and their processing all happen at `instant`.
      const paymentId = await paidPayment(merchant, 3000);
      const happened = [`payment.succeeded ${paymentId}`];
      const refunds: Array<{ created: Json; done: Json }> = [];
      for (const amount of [100, 200, 300]) {
        const refund = await settledRefund(merchant, paymentId, amount);
        expect(refund.done.status).toBe("succeeded");
        refunds.push(refund);
        happened.push(`refund.pending ${refund.created.refund_id}`, `refund.succeeded ${refund.created.refund_id}`);
      }
      expect(clock.now().toISOString()).toBe(instant);
      const newestFirst = [...happened].reverse();

      const all = await api.list({});
      expect(all).toMatchObject({ total_count: 7, has_more: false });
      expect(abouts(all)).toEqual(newestFirst);
      expect((all.data as Json[]).map((e) => e.created)).toEqual(Array(7).fill(instant));
      for (const limit of [1, 2, 3]) {
        expect((await allPages(api, {}, limit)).map(about), `pages of ${limit}`).toEqual(newestFirst);
      }

      // One refund's two events: same created, succeeded (with the settled refund) first.
      const { created, done } = refunds[1]!;
      const ofRefund = await api.list({ object_id: created.refund_id as string });
      expect(ofRefund).toEqual({
        data: [
          { event_id: expect.any(String), type: "refund.succeeded", created: instant, data: { object: done }, delivery: noWebhookUrl },
          { event_id: expect.any(String), type: "refund.pending", created: instant, data: { object: created }, delivery: noWebhookUrl },
        ],
        total_count: 2,
        has_more: false,
      });
      expect(await api.list({ object_id: created.refund_id as string, limit: 1, offset: 1 })).toEqual({
        data: [(ofRefund.data as Json[])[1]],
        total_count: 2,
        has_more: false,
      });

      // A window of exactly that instant holds them all, in the same order.
      expect(await api.list({ created_gte: instant, created_lte: instant })).toEqual(all);
      expect(abouts(await api.list({ type: "refund.pending" }))).toEqual(newestFirst.filter((e) => e.startsWith("refund.pending")));
    });
  });

  describe("scope", () => {
    it("a production key of the same merchant sees no sandbox event: its list is empty, retrieving one is 404 HE_02", async () => {
      const { merchant, api: sandbox } = await merchantApi();
      const paymentId = await paidPayment(merchant, 1000);
      const sandboxEvent = await onlyEvent(sandbox);
      const productionKey = await issueKey(service.url, merchant.merchantId, "production");
      const production = restApi(productionKey);

      expect(await production.list({})).toEqual(empty);
      expect(await production.list({ object_id: paymentId })).toEqual(empty);
      expect(await production.list({ type: "payment.succeeded" })).toEqual(empty);
      await expectError(production.retrieve(sandboxEvent.event_id as string), "HE_02", sandboxEvent.event_id as string);
      await expectError(production.redeliver(sandboxEvent.event_id as string), "HE_02", sandboxEvent.event_id as string);

      // Production has no processor yet, so a production payment is refused and writes no event.
      const refused = await rest(service.url, "POST", "/payments", {
        apiKey: productionKey,
        body: { amount: 1000, currency: "USD", profile_id: merchant.profileId },
      });
      expectRestError(refused, 400, "IR_16");
      expect(await production.list({})).toEqual(empty);
      expect(await sandbox.list({})).toEqual({ data: [sandboxEvent], total_count: 1, has_more: false });
    });

    it("a production event (written to the database directly: no production processor exists yet) is the production key's only", async () => {
      const { merchant, api: sandbox } = await merchantApi();
      await createPayment(service.url, merchant);
      const sandboxEvent = await onlyEvent(sandbox);
      const production = restApi(await issueKey(service.url, merchant.merchantId, "production"));

      const createdAt = clock.tick();
      const live = {
        event_id: uniqueId("evt"),
        type: "payment.requires_payment_method",
        created: createdAt,
        data: { object: { payment_id: "pay_live" } },
        delivery: noWebhookUrl,
      };
      await service.app.dataSource.query(
        "INSERT INTO events (event_id, merchant_id, livemode, type, object_id, data, created) VALUES ($1, $2, true, $3, 'pay_live', $4, $5)",
        [live.event_id, merchant.merchantId, live.type, JSON.stringify(live.data), createdAt],
      );

      expect(await production.list({})).toEqual({ data: [live], total_count: 1, has_more: false });
      expect(await production.retrieve(live.event_id)).toEqual(live);
      await expectError(production.retrieve(sandboxEvent.event_id as string), "HE_02");
      expect(await sandbox.list({})).toEqual({ data: [sandboxEvent], total_count: 1, has_more: false });
      expect(await sandbox.list({ object_id: "pay_live" })).toEqual(empty);
      await expectError(sandbox.retrieve(live.event_id), "HE_02", live.event_id);
      // Written without a profile (as events were before webhooks), it has nowhere to be redelivered to.
      await expectError(production.redeliver(live.event_id), "IR_16", live.event_id);
    });

    it("a publishable key of the merchant may not read nor redeliver events (403 IR_22), whatever the id", async () => {
      const { merchant, api } = await merchantApi();
      await createPayment(service.url, merchant);
      const event = await onlyEvent(api);
      const publishable = restApi(await issueKey(service.url, merchant.merchantId, "sandbox", "publishable"));
      await expectError(publishable.list({}), "IR_22");
      await expectError(publishable.retrieve(event.event_id as string), "IR_22");
      await expectError(publishable.retrieve("evt_missing"), "IR_22");
      await expectError(publishable.redeliver(event.event_id as string), "IR_22");
    });
  });

  describe("redelivery", () => {
    it("is IR_16 naming the profile when the event's profile has no webhook_url; nothing changes", async () => {
      const { merchant, api } = await merchantApi();
      await createPayment(service.url, merchant);
      const event = await onlyEvent(api);
      expect(event.delivery).toEqual(noWebhookUrl);
      const eventId = event.event_id as string;
      expect(await expectError(api.redeliver(eventId), "IR_16", merchant.profileId, eventId)).toContain("webhook_url");
      // An empty id is no path at all.
      await expectError(api.redeliver(""), "IR_02", "/events//redeliver");
      expect(await api.retrieve(eventId)).toEqual(event);
    });

    it("another merchant's event and an unknown id are 404 HE_02 naming the id; the owner's delivery is untouched", async () => {
      const receiver = await startReceiver();
      try {
        const owner = await merchantApi();
        await updateProfile(service.url, owner.merchant, { webhook_url: receiver.url });
        await createPayment(service.url, owner.merchant);
        await service.app.webhooks.deliverDue();
        const event = await onlyEvent(owner.api);
        const eventId = event.event_id as string;
        expect(event.delivery).toMatchObject({ status: "delivered", attempts: 1 });

        const stranger = await merchantApi();
        await updateProfile(service.url, stranger.merchant, { webhook_url: receiver.url });
        expect(await expectError(stranger.api.redeliver(eventId), "HE_02", eventId)).toBe(`Event not found: ${eventId}`);
        await expectError(stranger.api.redeliver("evt_missing"), "HE_02", "evt_missing");
        await expectError(owner.api.redeliver(uniqueId("evt")), "HE_02");
        await service.app.webhooks.deliverDue();
        expect(receiver.requests).toHaveLength(1);
        expect(await owner.api.retrieve(eventId)).toEqual(event);
      } finally {
        await receiver.close();
      }
    });

    it("makes the event due now (a first delivery for one written before the webhook_url was set) and sends it again once delivered", async () => {
      const receiver = await startReceiver();
      try {
        const { merchant, api } = await merchantApi();
        await createPayment(service.url, merchant);
        const event = await onlyEvent(api);
        const eventId = event.event_id as string;
        expect(event.delivery).toEqual(noWebhookUrl);
        await updateProfile(service.url, merchant, { webhook_url: receiver.url });

        const first = clock.tick();
        const redelivered = await api.redeliver(eventId);
        expect(redelivered).toEqual({
          ...event,
          delivery: { ...noWebhookUrl, status: "pending", next_attempt_at: first },
        });
        await service.app.webhooks.deliverDue();
        expect(receiver.requests.map((r) => r.headers["webhook-id"])).toEqual([eventId]);
        const delivered = { status: "delivered", attempts: 1, last_response_status: 200, last_error: null, last_attempt_at: first };
        expect((await api.retrieve(eventId)).delivery).toEqual({ ...delivered, next_attempt_at: null });

        // Delivered already: redeliver sends it once more; attempts count every one.
        const second = clock.tick();
        expect((await api.redeliver(eventId)).delivery).toEqual({ ...delivered, status: "pending", next_attempt_at: second });
        await service.app.webhooks.deliverDue();
        expect(receiver.requests.map((r) => r.headers["webhook-id"])).toEqual([eventId, eventId]);
        expect(receiver.requests[1]!.body).toBe(receiver.requests[0]!.body);
        expect(await api.retrieve(eventId)).toEqual({
          ...event,
          delivery: { ...delivered, attempts: 2, last_attempt_at: second, next_attempt_at: null },
        });
      } finally {
        await receiver.close();
      }
    });
  });
});

/**
 * A history of 25 payment events in one merchant, over REST: 13 payments created, 8 of them then
 * confirmed, 2 declined and 2 cancelled, three events per clock instant (so ties are in every page). Returns what
 * happened, oldest first, as "<type> <payment id>" with the instant of each.
 */
async function history(merchant: TestMerchant): Promise<{ happened: string[]; created: string[]; paymentIds: string[] }> {
  const happened: string[] = [];
  const created: string[] = [];
  let step = 0;
  const record = (payment: Json) => {
    happened.push(`payment.${payment.status} ${payment.payment_id}`);
    created.push(clock.now().toISOString());
    if (++step % 3 === 0) clock.tick();
  };
  clock.tick();
  const paymentIds: string[] = [];
  for (let i = 0; i < 13; i++) {
    const payment = await createPayment(service.url, merchant, { amount: 100 + i });
    paymentIds.push(payment.payment_id as string);
    record(payment);
  }
  for (const id of paymentIds.slice(0, 8)) record(await confirm(merchant, id));
  for (const id of paymentIds.slice(8, 10)) record(await confirm(merchant, id, declined));
  for (const id of paymentIds.slice(10, 12)) record(await cancel(merchant, id));
  expect(happened).toHaveLength(25);
  expect(new Set(happened.map((h) => h.split(" ")[0]))).toEqual(
    new Set(["payment.requires_payment_method", "payment.succeeded", "payment.failed", "payment.cancelled"]),
  );
  return { happened, created, paymentIds };
}

describe.each(["POST", "GET"] as const)("listing events with %s", (listWith) => {
  it("lists newest first; pages of any size never skip or repeat an event; total_count and has_more are exact", async () => {
    const { merchant, api } = await merchantApi(listWith);
    const { happened, created } = await history(merchant);

    const all = await api.list({ limit: 100 });
    expect(all).toMatchObject({ total_count: 25, has_more: false });
    expect(abouts(all)).toEqual([...happened].reverse());
    expect((all.data as Json[]).map((e) => e.created)).toEqual([...created].reverse());
    expect(new Set((all.data as Json[]).map((e) => e.event_id)).size).toBe(25);

    // The default page is the first 10.
    expect(await api.list({})).toEqual({ data: (all.data as Json[]).slice(0, 10), total_count: 25, has_more: true });
    for (const limit of [1, 4, 7, 10, 25]) {
      expect(await allPages(api, {}, limit), `pages of ${limit}`).toEqual(all.data);
    }
    expect(await api.list({ limit: 5, offset: 20 })).toEqual({ data: (all.data as Json[]).slice(20), total_count: 25, has_more: false });
    expect(await api.list({ limit: 5, offset: 19 })).toEqual({ data: (all.data as Json[]).slice(19, 24), total_count: 25, has_more: true });
    expect(await api.list({ offset: 25 })).toEqual({ data: [], total_count: 25, has_more: false });
    expect(await api.list({ offset: 1000 })).toEqual({ data: [], total_count: 25, has_more: false });
  });

  it("filters by type and object_id (exact), alone, together and across pages", async () => {
    const { merchant, api } = await merchantApi(listWith);
    const { paymentIds } = await history(merchant);
    const all = (await api.list({ limit: 100 })).data as Json[];

    for (const [type, count] of [
      ["payment.requires_payment_method", 13],
      ["payment.succeeded", 8],
      ["payment.failed", 2],
      ["payment.cancelled", 2],
    ] as const) {
      const matching = all.filter((e) => e.type === type);
      expect(matching).toHaveLength(count);
      expect(await api.list({ type, limit: 100 })).toEqual({ data: matching, total_count: count, has_more: false });
      expect(await allPages(api, { type }, 3)).toEqual(matching);
    }
    expect(await api.list({ type: "payment.requires_payment_method", limit: 5, offset: 5 })).toEqual({
      data: all.filter((e) => e.type === "payment.requires_payment_method").slice(5, 10),
      total_count: 13,
      has_more: true,
    });

    const [confirmed, , , , , , , , failed, , cancelled] = paymentIds;
    for (const [id, types] of [
      [confirmed!, ["payment.succeeded", "payment.requires_payment_method"]],
      [failed!, ["payment.failed", "payment.requires_payment_method"]],
      [cancelled!, ["payment.cancelled", "payment.requires_payment_method"]],
    ] as const) {
      const page = await api.list({ object_id: id });
      expect(page).toEqual({ data: all.filter((e) => about(e).endsWith(` ${id}`)), total_count: 2, has_more: false });
      const [newest] = page.data as Json[];
      expect((page.data as Json[]).map((e) => e.type)).toEqual(types);
      expect(await api.list({ object_id: id, type: types[0] })).toEqual({ data: [newest], total_count: 1, has_more: false });
    }
    expect(await api.list({ object_id: confirmed!, type: "payment.failed" })).toEqual(empty);

    // Exact matches only: no prefix of a type, no unknown type or object.
    expect(await api.list({ type: "payment" })).toEqual(empty);
    expect(await api.list({ type: "payment.succeede" })).toEqual(empty);
    expect(await api.list({ type: "refund.succeeded" })).toEqual(empty);
    expect(await api.list({ object_id: "pay_missing" })).toEqual(empty);
    expect(await api.list({ object_id: confirmed!.slice(0, -1) })).toEqual(empty);

    // Another merchant's object lists nothing, for either of them.
    const other = await newMerchant(service.url);
    const theirs = await createPayment(service.url, other);
    expect(await api.list({ object_id: theirs.payment_id as string })).toEqual(empty);
    expect(await restApi(other.apiKey, listWith).list({ object_id: confirmed! })).toEqual(empty);
  });

  it("filters by created_gte and created_lte, both inclusive, with the other filters and pages", async () => {
    const { merchant, api } = await merchantApi(listWith);
    await history(merchant);
    const all = (await api.list({ limit: 100 })).data as Json[];
    const instants = [...new Set(all.map((e) => e.created as string))].sort();
    expect(instants.length).toBeGreaterThan(5);
    const within = (gte: string | undefined, lte: string | undefined) =>
      all.filter((e) => (gte === undefined || (e.created as string) >= gte) && (lte === undefined || (e.created as string) <= lte));

    const [gte, lte] = [instants[2]!, instants[instants.length - 3]!];
    for (const [params, expected] of [
      [{ created_gte: gte }, within(gte, undefined)],
      [{ created_lte: lte }, within(undefined, lte)],
      [{ created_gte: gte, created_lte: lte }, within(gte, lte)],
      [{ created_gte: instants[4]!, created_lte: instants[4]! }, within(instants[4], instants[4])],
    ] as const) {
      expect(expected.length).toBeGreaterThan(0);
      expect(expected.length).toBeLessThan(all.length);
      expect(await api.list({ ...params, limit: 100 })).toEqual({ data: expected, total_count: expected.length, has_more: false });
      expect(await allPages(api, params, 2)).toEqual(expected);
    }
    // Both bounds are inclusive: the window of one instant holds its three events.
    expect(within(instants[4], instants[4])).toHaveLength(3);

    const later = new Date(Date.parse(instants[instants.length - 1]!) + 1).toISOString();
    expect(await api.list({ created_gte: later })).toEqual(empty);
    const earlier = new Date(Date.parse(instants[0]!) - 1).toISOString();
    expect(await api.list({ created_lte: earlier })).toEqual(empty);

    const succeededWithin = within(gte, lte).filter((e) => e.type === "payment.succeeded");
    expect(await api.list({ created_gte: gte, created_lte: lte, type: "payment.succeeded", limit: 100 })).toEqual({
      data: succeededWithin,
      total_count: succeededWithin.length,
      has_more: false,
    });
  });

  it.each([0, 101, -1])("refuses limit %i with 400 IR_06 naming limit", async (limit) => {
    const { api } = await merchantApi(listWith);
    await expectError(api.list({ limit }), "IR_06", "limit");
  });

  it("refuses offset -1 with 400 IR_05 naming offset", async () => {
    const { api } = await merchantApi(listWith);
    await expectError(api.list({ offset: -1 }), "IR_05", "offset");
  });
});

describe("events over REST only", () => {
  it("lists the same page via GET query parameters and via POST body, every parameter at once", async () => {
    const merchant = await newMerchant(service.url);
    const { paymentIds } = await history(merchant);
    const all = (await restApi(merchant.apiKey).list({ limit: 100 })).data as Json[];
    const lte = all[3]!.created as string;
    const gte = all[all.length - 4]!.created as string;
    const params = { limit: 1, offset: 1, type: "payment.requires_payment_method", created_gte: gte, created_lte: lte };
    const query = `limit=1&offset=1&type=payment.requires_payment_method&created_gte=${encodeURIComponent(gte)}&created_lte=${encodeURIComponent(lte)}`;
    const viaGet = await rest(service.url, "GET", `/events/list?${query}`, { apiKey: merchant.apiKey });
    const viaPost = await rest(service.url, "POST", "/events/list", { apiKey: merchant.apiKey, body: params });
    expect(viaGet.status, JSON.stringify(viaGet.body)).toBe(200);
    expect(viaGet.body).toEqual(viaPost.body);
    const expected = all.filter((e) => e.type === "payment.requires_payment_method" && e.created! >= gte && e.created! <= lte);
    expect(expected.length).toBeGreaterThan(2);
    expect(viaGet.body).toEqual({ data: [expected[1]], total_count: expected.length, has_more: true });

    const id = paymentIds[0]!;
    const byObject = await rest(service.url, "GET", `/events/list?object_id=${id}&type=payment.succeeded`, { apiKey: merchant.apiKey });
    const byObjectPost = await rest(service.url, "POST", "/events/list", {
      apiKey: merchant.apiKey,
      body: { object_id: id, type: "payment.succeeded" },
    });
    expect(byObject.body).toEqual(byObjectPost.body);
    expect(byObject.body).toMatchObject({ total_count: 1, has_more: false, data: [{ type: "payment.succeeded" }] });
  });

  it("routes GET /events/list to the list, not to an event called list", async () => {
    const merchant = await newMerchant(service.url);
    await createPayment(service.url, merchant);
    const res = await rest(service.url, "GET", "/events/list", { apiKey: merchant.apiKey });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ total_count: 1, has_more: false });
  });
});

describe("events over RPC only", () => {
  it("an empty event_id is IR_04 naming event_id on retrieve and redeliver, not an event called ''", async () => {
    const merchant = await newMerchant(service.url);
    await createPayment(service.url, merchant);
    const events = rpcClient(EventService, service.url, "connect", { apiKey: merchant.apiKey });
    // REST cannot send one (GET /events/ is no path); a typed client can.
    await expectError(events.retrieveEvent({ eventId: "" }), "IR_04", "event_id");
    await expectError(events.redeliverEvent({ eventId: "" }), "IR_04", "event_id");
  });
});
