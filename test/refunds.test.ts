import { describe, expect, it } from "vitest";
import { type RefundReason, RefundService } from "../gen/paymentservice/v1/refund_pb.js";
import { cardData } from "./support/cards.js";
import { rest, rpcClient } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { expectRestError } from "./support/errors.js";
import { eventsOf } from "./support/events.js";
import { newMerchant, type TestMerchant } from "./support/merchant.js";
import { expectError, type Json, restCaller, restList } from "./support/resource-api.js";
import { createPayment } from "./support/payments.js";
import { runningService } from "./support/running.js";
import { noPolling } from "./support/service.js";
import { waitUntil } from "./support/wait.js";

/*
 * Refunds (interface §2–§4, §7 items 4–5, §8; decisions §4 "full amount", §5, §7, §9), each scenario
 * once, over REST: it talks to a small RefundApi that sends the documented JSON. That every RPC
 * carries the same request and answer over Connect, gRPC and gRPC-Web is the protocol-parity suite's
 * subject (test/parity); what only an RPC caller can send is tested over Connect at the end.
 *
 * The service runs on a TestClock with the background poll out of reach. Instant refunds are still
 * processed right after their commit (the runner is woken); tests wait for the outcome by running due
 * jobs and retrieving the refund until it leaves pending. Scheduled refunds move only when a test
 * advances the clock past SCHEDULED_REFUND_DELAY_SECONDS (default 60) and runs due jobs.
 */

const clock = new TestClock();
const service = runningService(noPolling, clock);

/** The documented default settlement delay of a scheduled refund. */
const scheduledDelayMs = 60_000;

/** The refund operations, as seen by a caller; results use the REST field names. */
interface RefundApi {
  create(body: Json): Promise<Json>;
  update(refundId: string, body: Json): Promise<Json>;
  retrieve(refundId: string): Promise<Json>;
  cancel(refundId: string): Promise<Json>;
  list(params: Json): Promise<Json>;
}

function restApi(apiKey: string, listWith: "GET" | "POST" = "POST"): RefundApi {
  const call = restCaller(service.url, apiKey);
  const at = (id: string) => `/refunds/${encodeURIComponent(id)}`;
  return {
    create: (body) => call("POST", "/refunds", body),
    update: (id, body) => call("POST", at(id), body),
    retrieve: (id) => call("GET", at(id)),
    cancel: (id) => call("POST", `${at(id)}/cancel`),
    list: restList(call, listWith, "/refunds/list"),
  };
}

/** A fresh merchant (sandbox secret key) and its RefundApi, so each scenario works in a merchant of its own. */
async function merchantApi(listWith: "GET" | "POST" = "POST"): Promise<{ merchant: TestMerchant; api: RefundApi }> {
  const merchant = await newMerchant(service.url);
  return { merchant, api: restApi(merchant.apiKey, listWith) };
}

const visa = "4242424242424242";
const declined = "4000000000000002";

/** Card fields for a payment request, expiring after the service's clock. */
const card = (number: string): Json => cardData(number, clock.now());

/** A succeeded payment of `amount` (at least 10000 lets the sandbox's scripted refund amounts fit). */
async function paidPayment(merchant: TestMerchant, amount = 10_000): Promise<string> {
  const payment = await createPayment(service.url, merchant, { amount, confirm: true, payment_method_data: card(visa) });
  expect(payment.status).toBe("succeeded");
  return payment.payment_id as string;
}

/** Payments of the merchant in each status a refund refuses. */
const unrefundable: Record<string, (merchant: TestMerchant) => Promise<Json>> = {
  requires_payment_method: (m) => createPayment(service.url, m, { amount: 1000 }),
  requires_capture: (m) =>
    createPayment(service.url, m, { amount: 1000, capture_method: "manual", confirm: true, payment_method_data: card(visa) }),
  failed: (m) => createPayment(service.url, m, { amount: 1000, confirm: true, payment_method_data: card(declined) }),
  cancelled: async (m) => {
    const created = await createPayment(service.url, m, { amount: 1000 });
    const res = await rest(service.url, "POST", `/payments/${created.payment_id}/cancel`, { apiKey: m.apiKey, body: {} });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  },
};

/**
 * Waits for a refund to leave pending: runs due jobs (the runner woken by the create may hold the job
 * at that moment) and retrieves it, a bounded number of times. Returns the refund as retrieved then.
 */
function settled(api: RefundApi, refundId: string): Promise<Json> {
  return waitUntil(
    async () => {
      await service.jobs.runDue();
      return api.retrieve(refundId);
    },
    (refund) => refund.status !== "pending",
  );
}

/**
 * The order of a refund's events at one clock instant: an instant refund is processed at the instant
 * it was created in, so its two events share `created`, and refund.pending, the one every refund
 * starts with, goes first among equals.
 */
const pendingFirst = (type: string) => (type === "refund.pending" ? 0 : 1);

/** Every refund and refund event of a merchant, to show that a refused request left nothing behind. */
async function refundRowsOf(merchantId: string): Promise<{ refunds: number; events: number }> {
  const [refunds] = await service.app.dataSource.query("SELECT count(*) AS n FROM refunds WHERE merchant_id = $1", [merchantId]);
  const [events] = await service.app.dataSource.query(
    "SELECT count(*) AS n FROM events WHERE merchant_id = $1 AND starts_with(type, 'refund.')",
    [merchantId],
  );
  return { refunds: Number(refunds.n), events: Number(events.n) };
}

const ids = (list: Json) => (list.data as Json[]).map((r) => r.refund_id);

describe("refunds", () => {
  /** A value the reason field cannot hold. */
  const badReason = "by_mistake";

  describe("create", () => {
    it("on a succeeded payment answers pending with the full refund object; an instant refund then succeeds", async () => {
      const { merchant, api } = await merchantApi();
      const paymentId = await paidPayment(merchant, 5000);
      const now = clock.tick();
      const created = await api.create({
        payment_id: paymentId,
        amount: 1200,
        reason: "requested_by_customer",
        metadata: { ticket: "T-1" },
      });
      expect(created).toEqual({
        refund_id: expect.stringMatching(/^ref_[0-9A-Za-z]+$/),
        payment_id: paymentId,
        merchant_id: merchant.merchantId,
        status: "pending",
        amount: 1200,
        currency: "USD",
        reason: "requested_by_customer",
        refund_type: "instant",
        error_code: null,
        error_message: null,
        metadata: { ticket: "T-1" },
        created: now,
        updated: now,
      });

      const done = await settled(api, created.refund_id as string);
      expect(done).toEqual({ ...created, status: "succeeded" });
      expect(await api.retrieve(created.refund_id as string)).toEqual(done);
    });

    it("without amount refunds everything still refundable: earlier refunds count, failed and cancelled ones do not", async () => {
      const { merchant, api } = await merchantApi();
      const paymentId = await paidPayment(merchant, 20_000);

      const partial = await api.create({ payment_id: paymentId, amount: 3000 });
      expect((await settled(api, partial.refund_id as string)).status).toBe("succeeded");
      const failed = await api.create({ payment_id: paymentId, amount: 9995 });
      expect((await settled(api, failed.refund_id as string)).status).toBe("failed");
      const cancelled = await api.create({ payment_id: paymentId, amount: 2000, refund_type: "scheduled" });
      expect((await api.cancel(cancelled.refund_id as string)).status).toBe("cancelled");
      const waiting = await api.create({ payment_id: paymentId, amount: 1000, refund_type: "scheduled" });
      expect(waiting.status).toBe("pending");

      // 20000 − 3000 (succeeded) − 1000 (pending); the failed 9995 and the cancelled 2000 are refundable again.
      const remainder = await api.create({ payment_id: paymentId });
      expect(remainder).toMatchObject({ status: "pending", amount: 16_000, payment_id: paymentId });
      expect((await settled(api, remainder.refund_id as string)).status).toBe("succeeded");

      // Nothing is left while the scheduled 1000 is pending; cancelling it makes it refundable again.
      await expectError(api.create({ payment_id: paymentId }), "IR_13");
      await expectError(api.create({ payment_id: paymentId, amount: 1 }), "IR_13");
      await api.cancel(waiting.refund_id as string);
      expect(await api.create({ payment_id: paymentId })).toMatchObject({ status: "pending", amount: 1000 });
    });

    it("refunds at most what was captured: a partial capture of 600 of 1000 leaves 600", async () => {
      const { merchant, api } = await merchantApi();
      const authorized = await createPayment(service.url, merchant, {
        amount: 1000,
        capture_method: "manual",
        confirm: true,
        payment_method_data: card(visa),
      });
      const captured = await rest(service.url, "POST", `/payments/${authorized.payment_id}/capture`, {
        apiKey: merchant.apiKey,
        body: { amount_to_capture: 600 },
      });
      expect(captured.body).toMatchObject({ status: "succeeded", amount_received: 600 });
      const paymentId = authorized.payment_id as string;

      await expectError(api.create({ payment_id: paymentId, amount: 601 }), "IR_13", "600");
      expect(await api.create({ payment_id: paymentId })).toMatchObject({ amount: 600, status: "pending" });
    });

    it("an amount above what is left is 400 IR_13 and creates nothing", async () => {
      const { merchant, api } = await merchantApi();
      const paymentId = await paidPayment(merchant, 1000);
      await expectError(api.create({ payment_id: paymentId, amount: 1001 }), "IR_13", "1000");
      const first = await api.create({ payment_id: paymentId, amount: 600 });
      await expectError(api.create({ payment_id: paymentId, amount: 401 }), "IR_13", "400");
      const second = await api.create({ payment_id: paymentId, amount: 400 });
      expect(second).toMatchObject({ status: "pending", amount: 400 });
      await expectError(api.create({ payment_id: paymentId, amount: 1 }), "IR_13");
      expect(ids(await api.list({ payment_id: paymentId }))).toEqual(expect.arrayContaining([first.refund_id, second.refund_id]));
      expect(await refundRowsOf(merchant.merchantId)).toMatchObject({ refunds: 2 });
    });

    it.each(Object.keys(unrefundable))("of a payment in %s is 400 IR_14 naming its status and creates nothing", async (status) => {
      const { merchant, api } = await merchantApi();
      const payment = await unrefundable[status]!(merchant);
      expect(payment.status).toBe(status);
      await expectError(api.create({ payment_id: payment.payment_id as string }), "IR_14", status, "succeeded");
      await expectError(api.create({ payment_id: payment.payment_id as string, amount: 100 }), "IR_14", status);
      expect(await refundRowsOf(merchant.merchantId)).toEqual({ refunds: 0, events: 0 });
    });

    it("without payment_id is 400 IR_04 naming payment_id", async () => {
      const { merchant, api } = await merchantApi();
      await expectError(api.create({ amount: 100 }), "IR_04", "payment_id");
      await expectError(api.create({ payment_id: "", amount: 100 }), "IR_04", "payment_id");
      expect(await refundRowsOf(merchant.merchantId)).toEqual({ refunds: 0, events: 0 });
    });

    it("of an unknown payment or another merchant's payment is 404 HE_02", async () => {
      const { merchant, api } = await merchantApi();
      await expectError(api.create({ payment_id: "pay_missing", amount: 100 }), "HE_02", "pay_missing");
      const other = await merchantApi();
      const theirs = await paidPayment(other.merchant, 1000);
      await expectError(api.create({ payment_id: theirs, amount: 100 }), "HE_02", theirs);
      await expectError(api.create({ payment_id: theirs }), "HE_02", theirs);
      expect(await refundRowsOf(merchant.merchantId)).toEqual({ refunds: 0, events: 0 });
      // Their payment is untouched: all of it is still refundable by its owner.
      expect(await other.api.create({ payment_id: theirs })).toMatchObject({ amount: 1000 });
    });

    it.each([0, -1, 1_000_000_000_000])("refuses amount %d with 400 IR_05 naming amount", async (amount) => {
      const { merchant, api } = await merchantApi();
      const paymentId = await paidPayment(merchant, 1000);
      await expectError(api.create({ payment_id: paymentId, amount }), "IR_05", "amount");
      expect(await refundRowsOf(merchant.merchantId)).toEqual({ refunds: 0, events: 0 });
    });

    it("accepts each documented reason and answers it; an unknown reason is 400 IR_05 naming reason", async () => {
      const { merchant, api } = await merchantApi();
      const paymentId = await paidPayment(merchant, 1000);
      for (const reason of ["requested_by_customer", "duplicate", "fraudulent"]) {
        const refund = await api.create({ payment_id: paymentId, amount: 10, reason });
        expect(refund.reason).toBe(reason);
        expect((await api.retrieve(refund.refund_id as string)).reason).toBe(reason);
      }
      expect((await api.create({ payment_id: paymentId, amount: 10 })).reason).toBeNull();
      await expectError(api.create({ payment_id: paymentId, amount: 10, reason: badReason }), "IR_05", "reason");
      expect((await api.list({ payment_id: paymentId })).total_count).toBe(4);
    });
  });

  describe("scheduled refunds and cancel", () => {
    it("a scheduled refund stays pending until SCHEDULED_REFUND_DELAY_SECONDS (60) have passed, then succeeds", async () => {
      const { merchant, api } = await merchantApi();
      const paymentId = await paidPayment(merchant, 1000);
      clock.tick();
      const created = await api.create({ payment_id: paymentId, amount: 700, refund_type: "scheduled" });
      expect(created).toMatchObject({ status: "pending", refund_type: "scheduled", amount: 700 });
      const id = created.refund_id as string;

      await service.jobs.runDue();
      expect(await api.retrieve(id)).toEqual(created);
      clock.advance(scheduledDelayMs - 1000);
      await service.jobs.runDue();
      expect(await api.retrieve(id)).toEqual(created);

      const dueAt = clock.tick(2000);
      await service.jobs.runDue();
      const done = await api.retrieve(id);
      expect(done).toEqual({ ...created, status: "succeeded", updated: dueAt });
      expect((await eventsOf(service, merchant.merchantId, id, pendingFirst)).map((e) => e.type)).toEqual([
        "refund.pending",
        "refund.succeeded",
      ]);
    });

    it("cancelling a pending scheduled refund → cancelled; it is never processed and its amount is refundable again", async () => {
      const { merchant, api } = await merchantApi();
      const paymentId = await paidPayment(merchant, 1000);
      const created = await api.create({ payment_id: paymentId, refund_type: "scheduled", reason: "duplicate" });
      expect(created).toMatchObject({ status: "pending", amount: 1000, refund_type: "scheduled" });
      const id = created.refund_id as string;
      await expectError(api.create({ payment_id: paymentId }), "IR_13");

      const cancelledAt = clock.tick();
      const cancelled = await api.cancel(id);
      expect(cancelled).toEqual({ ...created, status: "cancelled", updated: cancelledAt });
      expect(await api.retrieve(id)).toEqual(cancelled);

      clock.advance(2 * scheduledDelayMs);
      await service.jobs.runDue();
      expect(await api.retrieve(id)).toEqual(cancelled);
      await expectError(api.cancel(id), "IR_16", "cancelled");
      expect(await eventsOf(service, merchant.merchantId, id, pendingFirst)).toEqual([
        { type: "refund.pending", object: created },
        { type: "refund.cancelled", object: cancelled },
      ]);

      const again = await api.create({ payment_id: paymentId });
      expect(again).toMatchObject({ amount: 1000, status: "pending" });
      expect((await settled(api, again.refund_id as string)).status).toBe("succeeded");
    });

    it("cancelling an instant refund or a succeeded one is 400 IR_16 and changes nothing", async () => {
      const { merchant, api } = await merchantApi();
      const paymentId = await paidPayment(merchant, 1000);

      const instant = await api.create({ payment_id: paymentId, amount: 100 });
      await expectError(api.cancel(instant.refund_id as string), "IR_16", "instant");
      const instantDone = await settled(api, instant.refund_id as string);
      expect(instantDone.status).toBe("succeeded");
      await expectError(api.cancel(instant.refund_id as string), "IR_16", "succeeded");

      const scheduled = await api.create({ payment_id: paymentId, amount: 200, refund_type: "scheduled" });
      clock.advance(scheduledDelayMs + 1000);
      await service.jobs.runDue();
      const scheduledDone = await api.retrieve(scheduled.refund_id as string);
      expect(scheduledDone.status).toBe("succeeded");
      await expectError(api.cancel(scheduled.refund_id as string), "IR_16", "succeeded");

      expect(await api.retrieve(instant.refund_id as string)).toEqual(instantDone);
      expect(await api.retrieve(scheduled.refund_id as string)).toEqual(scheduledDone);
      expect((await eventsOf(service, merchant.merchantId, scheduled.refund_id as string, pendingFirst)).map((e) => e.type)).toEqual([
        "refund.pending",
        "refund.succeeded",
      ]);
    });
  });

  describe("update", () => {
    it('changes reason and merges metadata ("" removes a key) without a new event', async () => {
      const { merchant, api } = await merchantApi();
      const paymentId = await paidPayment(merchant, 1000);
      const created = await api.create({
        payment_id: paymentId,
        amount: 300,
        reason: "duplicate",
        metadata: { keep: "1", change: "old", drop: "x" },
      });
      const id = created.refund_id as string;
      const done = await settled(api, id);

      const updatedAt = clock.tick();
      const updated = await api.update(id, { reason: "fraudulent", metadata: { change: "new", drop: "", added: "2" } });
      expect(updated).toEqual({
        ...done,
        reason: "fraudulent",
        metadata: { keep: "1", change: "new", added: "2" },
        updated: updatedAt,
      });
      expect(await api.retrieve(id)).toEqual(updated);

      // Fields not sent stay as they are.
      const again = await api.update(id, { metadata: { more: "3" } });
      expect(again).toMatchObject({ reason: "fraudulent", metadata: { keep: "1", change: "new", added: "2", more: "3" } });
      expect((await eventsOf(service, merchant.merchantId, id, pendingFirst)).map((e) => e.type)).toEqual([
        "refund.pending",
        "refund.succeeded",
      ]);
    });

    it("sending amount or payment_id is 400 IR_06 naming the field, and nothing changes", async () => {
      const { merchant, api } = await merchantApi();
      const paymentId = await paidPayment(merchant, 1000);
      const otherPayment = await paidPayment(merchant, 1000);
      const created = await api.create({ payment_id: paymentId, amount: 300, reason: "duplicate", metadata: { k: "v" } });
      const id = created.refund_id as string;
      const done = await settled(api, id);
      clock.tick();

      await expectError(api.update(id, { amount: 100, reason: "fraudulent", metadata: { k: "changed" } }), "IR_06", "amount");
      await expectError(api.update(id, { payment_id: otherPayment, metadata: { k: "changed" } }), "IR_06", "payment_id");
      await expectError(api.update(id, { reason: badReason, metadata: { k: "changed" } }), "IR_05", "reason");
      expect(await api.retrieve(id)).toEqual(done);
    });
  });

  describe("sandbox refund outcomes", () => {
    it("amount 9995 → failed with error_code refund_declined and an error_message; the amount stays refundable", async () => {
      const { merchant, api } = await merchantApi();
      const paymentId = await paidPayment(merchant, 10_000);
      const created = await api.create({ payment_id: paymentId, amount: 9995 });
      expect(created).toMatchObject({ status: "pending", error_code: null, error_message: null });
      const failed = await settled(api, created.refund_id as string);
      expect(failed).toEqual({
        ...created,
        status: "failed",
        error_code: "refund_declined",
        error_message: expect.stringMatching(/\S/),
      });
      expect(await api.create({ payment_id: paymentId })).toMatchObject({ amount: 10_000 });
    });

    it("amount 9996 → manual_review, which still counts against the refundable amount", async () => {
      const { merchant, api } = await merchantApi();
      const paymentId = await paidPayment(merchant, 10_000);
      const created = await api.create({ payment_id: paymentId, amount: 9996 });
      const review = await settled(api, created.refund_id as string);
      expect(review).toEqual({ ...created, status: "manual_review" });
      await expectError(api.create({ payment_id: paymentId, amount: 5 }), "IR_13");
      expect(await api.create({ payment_id: paymentId })).toMatchObject({ amount: 4 });
      await expectError(api.cancel(created.refund_id as string), "IR_16", "manual_review");
    });

    it("a decided refund leaves no job behind, whatever the processor decided", async () => {
      const { merchant, api } = await merchantApi();
      const paymentId = await paidPayment(merchant, 30_000);
      const refunds = await Promise.all([100, 9995, 9996].map((amount) => api.create({ payment_id: paymentId, amount })));
      const decided = await Promise.all(refunds.map((refund) => settled(api, refund.refund_id as string)));
      expect(decided.map((refund) => refund.status)).toEqual(["succeeded", "failed", "manual_review"]);
      const [left] = await service.app.dataSource.query("SELECT count(*) AS n FROM jobs WHERE merchant_id = $1 AND object_id = ANY($2)", [
        merchant.merchantId,
        refunds.map((refund) => refund.refund_id),
      ]);
      expect(Number(left.n)).toBe(0);
    });
  });

  describe("retrieve and ownership", () => {
    it("answers 404 HE_02 naming an unknown refund on every operation", async () => {
      const { api } = await merchantApi();
      await expectError(api.retrieve("ref_missing"), "HE_02", "ref_missing");
      await expectError(api.update("ref_missing", { reason: "duplicate" }), "HE_02", "ref_missing");
      await expectError(api.cancel("ref_missing"), "HE_02", "ref_missing");
    });

    it("another merchant can neither see nor act on a refund (404 HE_02), nor list it", async () => {
      const owner = await merchantApi();
      const paymentId = await paidPayment(owner.merchant, 1000);
      const created = await owner.api.create({ payment_id: paymentId, amount: 100, refund_type: "scheduled" });
      const id = created.refund_id as string;

      const stranger = await merchantApi();
      await expectError(stranger.api.retrieve(id), "HE_02");
      await expectError(stranger.api.update(id, { metadata: { k: "v" } }), "HE_02");
      await expectError(stranger.api.cancel(id), "HE_02");
      expect(await stranger.api.list({})).toEqual({ data: [], total_count: 0, has_more: false });
      expect(await stranger.api.list({ payment_id: paymentId })).toEqual({ data: [], total_count: 0, has_more: false });
      expect(await owner.api.retrieve(id)).toEqual(created);
    });
  });

  describe("events", () => {
    it.each([
      ["succeeded", 500],
      ["failed", 9995],
      ["manual_review", 9996],
    ])("refund.pending on create, then refund.%s, each with the object as retrieve returned it then", async (status, amount) => {
      const { merchant, api } = await merchantApi();
      const paymentId = await paidPayment(merchant, 10_000);
      clock.tick();
      const created = await api.create({ payment_id: paymentId, amount, metadata: { order: "7" } });
      const done = await settled(api, created.refund_id as string);
      expect(done.status).toBe(status);
      expect(await eventsOf(service, merchant.merchantId, created.refund_id as string, pendingFirst)).toEqual([
        { type: "refund.pending", object: created },
        { type: `refund.${status}`, object: done },
      ]);
    });

    it("a scheduled refund's pending event is the object retrieve answered before processing", async () => {
      const { merchant, api } = await merchantApi();
      const paymentId = await paidPayment(merchant, 1000);
      const created = await api.create({ payment_id: paymentId, amount: 250, refund_type: "scheduled" });
      const before = await api.retrieve(created.refund_id as string);
      expect(before).toEqual(created);
      clock.advance(scheduledDelayMs + 1000);
      await service.jobs.runDue();
      const after = await api.retrieve(created.refund_id as string);
      expect(await eventsOf(service, merchant.merchantId, created.refund_id as string, pendingFirst)).toEqual([
        { type: "refund.pending", object: before },
        { type: "refund.succeeded", object: after },
      ]);
    });

    it("a refused request writes no refund and no event", async () => {
      const { merchant, api } = await merchantApi();
      const paymentId = await paidPayment(merchant, 1000);
      await expectError(api.create({ payment_id: paymentId, amount: 0 }), "IR_05", "amount");
      await expectError(api.create({ payment_id: paymentId, amount: 1001 }), "IR_13");
      await expectError(api.create({ payment_id: paymentId, reason: badReason }), "IR_05", "reason");
      await expectError(api.create({ amount: 10 }), "IR_04", "payment_id");
      await expectError(api.create({ payment_id: "pay_missing" }), "HE_02");
      expect(await refundRowsOf(merchant.merchantId)).toEqual({ refunds: 0, events: 0 });
    });
  });
});

describe.each(["POST", "GET"] as const)("listing refunds with %s", (listWith) => {
  it("lists newest first with exact total_count and has_more across pages", async () => {
    const { merchant, api } = await merchantApi(listWith);
    const paymentId = await paidPayment(merchant, 1000);
    const created: Json[] = [];
    for (const amount of [10, 20, 30]) {
      clock.tick();
      created.push(await api.create({ payment_id: paymentId, amount, refund_type: "scheduled" }));
    }
    const [r1, r2, r3] = created;

    expect(await api.list({})).toEqual({ data: [r3, r2, r1], total_count: 3, has_more: false });
    expect(await api.list({ limit: 2 })).toEqual({ data: [r3, r2], total_count: 3, has_more: true });
    expect(await api.list({ limit: 2, offset: 2 })).toEqual({ data: [r1], total_count: 3, has_more: false });
    expect(await api.list({ limit: 1, offset: 1 })).toEqual({ data: [r2], total_count: 3, has_more: true });
    expect(await api.list({ offset: 3 })).toEqual({ data: [], total_count: 3, has_more: false });
  });

  it("returns 10 by default and up to 100", async () => {
    const { merchant, api } = await merchantApi(listWith);
    const paymentId = await paidPayment(merchant, 1000);
    for (let i = 0; i < 11; i++) await api.create({ payment_id: paymentId, amount: 1, refund_type: "scheduled" });
    const page = await api.list({});
    expect(page.data).toHaveLength(10);
    expect(page).toMatchObject({ total_count: 11, has_more: true });
    const all = await api.list({ limit: 100 });
    expect(all.data).toHaveLength(11);
    expect(all).toMatchObject({ total_count: 11, has_more: false });
  });

  it("filters by payment_id, status, created_gte and created_lte (inclusive)", async () => {
    const { merchant, api } = await merchantApi(listWith);
    const p1 = await paidPayment(merchant, 20_000);
    const p2 = await paidPayment(merchant, 20_000);

    clock.tick();
    const succeeded = await api.create({ payment_id: p1, amount: 100 });
    await settled(api, succeeded.refund_id as string);
    clock.tick();
    const failed = await api.create({ payment_id: p1, amount: 9995 });
    await settled(api, failed.refund_id as string);
    clock.tick();
    const review = await api.create({ payment_id: p2, amount: 9996 });
    await settled(api, review.refund_id as string);
    clock.tick();
    const cancelled = await api.create({ payment_id: p2, amount: 200, refund_type: "scheduled" });
    clock.tick();
    await api.cancel(cancelled.refund_id as string);
    clock.tick();
    const pending = await api.create({ payment_id: p1, amount: 300, refund_type: "scheduled" });

    // Everything as it is now, newest first.
    const [rPending, rCancelled, rReview, rFailed, rSucceeded] = await Promise.all(
      [pending, cancelled, review, failed, succeeded].map((r) => api.retrieve(r.refund_id as string)),
    );
    expect([rPending, rCancelled, rReview, rFailed, rSucceeded].map((r) => r!.status)).toEqual([
      "pending",
      "cancelled",
      "manual_review",
      "failed",
      "succeeded",
    ]);

    expect(await api.list({})).toEqual({ data: [rPending, rCancelled, rReview, rFailed, rSucceeded], total_count: 5, has_more: false });
    expect(await api.list({ payment_id: p1 })).toEqual({ data: [rPending, rFailed, rSucceeded], total_count: 3, has_more: false });
    expect(ids(await api.list({ payment_id: p2 }))).toEqual([rCancelled!.refund_id, rReview!.refund_id]);
    expect(await api.list({ payment_id: "pay_none" })).toEqual({ data: [], total_count: 0, has_more: false });
    for (const refund of [rPending, rCancelled, rReview, rFailed, rSucceeded]) {
      expect(await api.list({ status: refund!.status as string })).toEqual({ data: [refund], total_count: 1, has_more: false });
    }
    expect(await api.list({ status: "succeeded", payment_id: p2 })).toEqual({ data: [], total_count: 0, has_more: false });
    expect(ids(await api.list({ status: "manual_review", payment_id: p2 }))).toEqual([rReview!.refund_id]);

    expect(ids(await api.list({ created_gte: rReview!.created! }))).toEqual([rPending, rCancelled, rReview].map((r) => r!.refund_id));
    expect(ids(await api.list({ created_lte: rFailed!.created! }))).toEqual([rFailed, rSucceeded].map((r) => r!.refund_id));
    expect(await api.list({ created_gte: rFailed!.created!, created_lte: rCancelled!.created!, limit: 2 })).toEqual({
      data: [rCancelled, rReview],
      total_count: 3,
      has_more: true,
    });
    expect(await api.list({ created_gte: rFailed!.created!, payment_id: p1 })).toEqual({
      data: [rPending, rFailed],
      total_count: 2,
      has_more: false,
    });
  });

  it.each([0, 101])("refuses limit %i with 400 IR_06 naming limit", async (limit) => {
    const { api } = await merchantApi(listWith);
    await expectError(api.list({ limit }), "IR_06", "limit");
  });

  it("refuses offset -1 with 400 IR_05 naming offset", async () => {
    const { api } = await merchantApi(listWith);
    await expectError(api.list({ offset: -1 }), "IR_05", "offset");
  });
});

describe("refunds over REST only", () => {
  it.each([
    ["fractional", 10.5],
    ["a string", "100"],
    ["a boolean", true],
  ])("refuses an amount that is %s with 400 IR_05 naming amount", async (_, amount) => {
    const merchant = await newMerchant(service.url);
    const paymentId = await paidPayment(merchant, 1000);
    const res = await rest(service.url, "POST", "/refunds", { apiKey: merchant.apiKey, body: { payment_id: paymentId, amount } });
    expect(expectRestError(res, 400, "IR_05")).toContain("amount");
    expect(await refundRowsOf(merchant.merchantId)).toEqual({ refunds: 0, events: 0 });
  });

  it("refuses an unknown refund_type with 400 IR_05 naming it", async () => {
    const merchant = await newMerchant(service.url);
    const paymentId = await paidPayment(merchant, 1000);
    const res = await rest(service.url, "POST", "/refunds", {
      apiKey: merchant.apiKey,
      body: { payment_id: paymentId, amount: 10, refund_type: "later" },
    });
    expect(expectRestError(res, 400, "IR_05")).toContain("refund_type");
    expect(await refundRowsOf(merchant.merchantId)).toEqual({ refunds: 0, events: 0 });
  });

  it("retrieves with GET /refunds/:refund_id", async () => {
    const merchant = await newMerchant(service.url);
    const paymentId = await paidPayment(merchant, 1000);
    const created = await rest(service.url, "POST", "/refunds", {
      apiKey: merchant.apiKey,
      body: { payment_id: paymentId, amount: 10, refund_type: "scheduled" },
    });
    expect(created.status).toBe(200);
    const got = await rest(service.url, "GET", `/refunds/${created.body.refund_id}`, { apiKey: merchant.apiKey });
    expect(got.status).toBe(200);
    expect(got.body).toEqual(created.body);
  });

  it("lists the same page via GET query parameters and via POST body", async () => {
    const merchant = await newMerchant(service.url);
    const api = restApi(merchant.apiKey);
    const paymentId = await paidPayment(merchant, 1000);
    const created: Json[] = [];
    for (const amount of [10, 20, 30]) {
      clock.tick();
      created.push(await api.create({ payment_id: paymentId, amount, refund_type: "scheduled" }));
    }
    const lte = created[2]!.created as string;
    const viaGet = await rest(
      service.url,
      "GET",
      `/refunds/list?limit=1&offset=1&status=pending&payment_id=${paymentId}&created_lte=${encodeURIComponent(lte)}`,
      { apiKey: merchant.apiKey },
    );
    const viaPost = await rest(service.url, "POST", "/refunds/list", {
      apiKey: merchant.apiKey,
      body: { limit: 1, offset: 1, status: "pending", payment_id: paymentId, created_lte: lte },
    });
    expect(viaGet.status).toBe(200);
    expect(viaGet.body).toEqual(viaPost.body);
    expect(viaGet.body).toEqual({ data: [created[1]], total_count: 3, has_more: true });
  });

  it("refuses an unknown status filter with 400 IR_05 naming status", async () => {
    const merchant = await newMerchant(service.url);
    const res = await rest(service.url, "GET", "/refunds/list?status=done", { apiKey: merchant.apiKey });
    expect(expectRestError(res, 400, "IR_05")).toContain("status");
  });
});

describe("refunds over RPC only", () => {
  it("a reason number RefundReason lacks is IR_05 naming reason, on create and on update; nothing is created or changed", async () => {
    const { merchant, api } = await merchantApi();
    const paymentId = await paidPayment(merchant, 1000);
    const refunds = rpcClient(RefundService, service.url, "connect", { apiKey: merchant.apiKey });
    // Proto enums are open: a typed client can send a number outside the enum, which REST's words cannot express.
    await expectError(refunds.createRefund({ paymentId, amount: 10n, reason: 99 as RefundReason }), "IR_05", "reason");
    expect(await refundRowsOf(merchant.merchantId)).toEqual({ refunds: 0, events: 0 });

    const created = await api.create({ payment_id: paymentId, amount: 10, reason: "duplicate" });
    const done = await settled(api, created.refund_id as string);
    await expectError(
      refunds.updateRefund({ refundId: created.refund_id as string, reason: 99 as RefundReason, metadata: { k: "changed" } }),
      "IR_05",
      "reason",
    );
    expect(await api.retrieve(created.refund_id as string)).toEqual(done);
  });
});
