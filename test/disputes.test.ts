import { describe, expect, it } from "vitest";
import { DisputeOutcome, SandboxService } from "../gen/paymentservice/v1/sandbox_pb.js";
import { cardData } from "./support/cards.js";
import { rest, rpcClient, type RestResponse } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { onPostgres } from "./support/database.js";
import { expectRestError } from "./support/errors.js";
import { eventsOf } from "./support/events.js";
import { issueKey, newMerchant, type TestMerchant } from "./support/merchant.js";
import { expectError, type Json, restCaller, restList } from "./support/resource-api.js";
import { createPayment, retrievePayment } from "./support/payments.js";
import { runningService, servicePair } from "./support/running.js";
import { noPolling, type TestService } from "./support/service.js";
import { waitUntil } from "./support/wait.js";

/*
 * Disputes (interface §2 Dispute, §3 dispute statuses, §4 accept; decisions §3 card 4000000000000259,
 * §4 "full amount", §5 errors, §7 lists, §8 events, §9 disputes), each scenario once, over REST: it
 * talks to a small DisputeApi that sends the documented JSON. That every RPC carries the same request
 * and answer over Connect, gRPC and gRPC-Web is the protocol-parity suite's subject (test/parity);
 * what only an RPC caller can send is tested over Connect further down.
 *
 * Time never passes by itself: the service runs on a TestClock with the background poll out of
 * reach. Jobs due at once (the dispute the test card reports) still run right after their commit
 * because the runner is woken; expiry happens only when a test advances the clock and calls runDue().
 */

const clock = new TestClock();
const service = runningService(noPolling, clock);

const day = 24 * 3_600_000;
/** How long a merchant has to answer a dispute (docs/disputes.md). */
const evidenceWindowMs = 7 * day;

const visa = "4242424242424242";
const disputeCard = "4000000000000259";
const declined = "4000000000000002";

/** Every evidence field of decisions §9, each with a distinct value. */
const fullEvidence = {
  uncategorized_text: "The customer received the goods.",
  customer_communication: "Email of 3 March confirming delivery.",
  receipt: "Receipt #1001",
  shipping_documentation: "Tracking 1Z999AA10123456784",
  product_description: "Blue mug, 350 ml",
  refund_policy: "Refunds within 30 days of delivery.",
} as const;

/** The dispute operations (sandbox ones included), as seen by a caller; results use the REST field names. */
interface DisputeApi {
  retrieve(disputeId: string): Promise<Json>;
  list(params: Json): Promise<Json>;
  accept(disputeId: string): Promise<Json>;
  evidence(disputeId: string, body: Json): Promise<Json>;
  open(paymentId: string): Promise<Json>;
  resolve(disputeId: string, body: Json): Promise<Json>;
}

function restApi(apiKey: string, listWith: "GET" | "POST" = "POST"): DisputeApi {
  const call = restCaller(service.url, apiKey);
  const at = (id: string) => `/disputes/${encodeURIComponent(id)}`;
  return {
    retrieve: (id) => call("GET", at(id)),
    list: restList(call, listWith, "/disputes/list"),
    accept: (id) => call("POST", `${at(id)}/accept`),
    evidence: (id, body) => call("POST", `${at(id)}/evidence`, body),
    open: (paymentId) => call("POST", `/sandbox/payments/${encodeURIComponent(paymentId)}/dispute`),
    resolve: (id, body) => call("POST", `/sandbox/disputes/${encodeURIComponent(id)}/resolve`, body),
  };
}

/** A fresh merchant (sandbox secret key) and its DisputeApi, so each scenario works in a merchant of its own. */
async function merchantApi(listWith: "GET" | "POST" = "POST"): Promise<{ merchant: TestMerchant; api: DisputeApi }> {
  const merchant = await newMerchant(service.url);
  return { merchant, api: restApi(merchant.apiKey, listWith) };
}

/** Card fields for a payment request, expiring after the service's clock. */
const card = (number: string): Json => cardData(number, clock.now());

/** Creates a payment over REST (scene setting), confirmed with `cardNumber` unless it is undefined. */
function paymentWith(merchant: TestMerchant, cardNumber: string | undefined, body: Json = {}): Promise<Json> {
  const confirmed = cardNumber === undefined ? {} : { confirm: true, payment_method_data: card(cardNumber) };
  return createPayment(service.url, merchant, { ...confirmed, ...body });
}

/** A succeeded 4242 payment of `amount` USD. */
async function succeededPayment(merchant: TestMerchant, amount = 5000): Promise<string> {
  const payment = await paymentWith(merchant, visa, { amount });
  expect(payment).toMatchObject({ status: "succeeded", amount_received: amount });
  return payment.payment_id as string;
}

/** A fresh merchant with a succeeded payment of 5000 USD and a dispute opened on it through the sandbox. */
async function openedDispute(): Promise<{ merchant: TestMerchant; api: DisputeApi; paymentId: string; dispute: Json }> {
  const { merchant, api } = await merchantApi();
  const paymentId = await succeededPayment(merchant);
  clock.tick();
  const dispute = await api.open(paymentId);
  expect(dispute.status).toBe("opened");
  return { merchant, api, paymentId, dispute };
}

/** The dispute the network reports on a payment made with the dispute card: waits for it with bounded polling. */
async function reportedDispute(api: DisputeApi, paymentId: string): Promise<Json> {
  const page = await waitUntil(
    () => api.list({ payment_id: paymentId }),
    (list) => (list.total_count as number) > 0,
  );
  expect(page.total_count).toBe(1);
  return (page.data as Json[])[0]!;
}

/** Creates a refund over REST; the raw response, as refusals are under test too. */
function createRefund(merchant: TestMerchant, paymentId: string, amount?: number): Promise<RestResponse> {
  return rest(service.url, "POST", "/refunds", {
    apiKey: merchant.apiKey,
    body: amount === undefined ? { payment_id: paymentId } : { payment_id: paymentId, amount },
  });
}

async function refundCount(merchant: TestMerchant, paymentId: string): Promise<number> {
  const res = await rest(service.url, "GET", `/refunds/list?payment_id=${paymentId}`, { apiKey: merchant.apiKey });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.total_count as number;
}

const ids = (list: Json) => (list.data as Json[]).map((d) => d.dispute_id);

describe("disputes", () => {
  describe("where disputes come from", () => {
    it("card 4000000000000259 with automatic capture: the payment succeeds, then a dispute opens by itself", async () => {
      const { merchant, api } = await merchantApi();
      const payment = await paymentWith(merchant, disputeCard, { amount: 4321, currency: "EUR" });
      expect(payment).toMatchObject({ status: "succeeded", amount_received: 4321, currency: "EUR" });

      // No runDue here: the runner woken after the payment's commit opens the dispute.
      const dispute = await reportedDispute(api, payment.payment_id as string);
      expect(dispute).toEqual({
        dispute_id: expect.stringMatching(/^dis_[0-9A-Za-z]+$/),
        payment_id: payment.payment_id,
        merchant_id: merchant.merchantId,
        status: "opened",
        amount: 4321,
        currency: "EUR",
        reason: "fraudulent",
        evidence_due_by: expect.any(String),
        evidence: null,
        metadata: {},
        created: expect.any(String),
        updated: dispute.created,
      });
      expect(Date.parse(dispute.evidence_due_by as string)).toBeGreaterThan(clock.now().getTime());
      expect(Date.parse(dispute.evidence_due_by as string) - Date.parse(dispute.created as string)).toBe(evidenceWindowMs);
      expect(await api.retrieve(dispute.dispute_id as string)).toEqual(dispute);
      // The payment itself stays succeeded.
      expect(await retrievePayment(service.url, merchant, payment.payment_id as string)).toMatchObject({
        status: "succeeded",
        amount_received: 4321,
      });

      // The job ran once: running due jobs again opens no second dispute.
      await service.jobs.runDue();
      expect(await api.list({ payment_id: payment.payment_id as string })).toEqual({ data: [dispute], total_count: 1, has_more: false });
      expect(await eventsOf(service, merchant.merchantId, dispute.dispute_id as string)).toEqual([
        { type: "dispute.opened", object: dispute },
      ]);
    });

    it("card 4000000000000259 with manual capture: no dispute until the capture, then one for the captured amount", async () => {
      const { merchant, api } = await merchantApi();
      const payment = await paymentWith(merchant, disputeCard, { capture_method: "manual" });
      const paymentId = payment.payment_id as string;
      expect(payment.status).toBe("requires_capture");
      await service.jobs.runDue();
      expect(await api.list({ payment_id: paymentId })).toEqual({ data: [], total_count: 0, has_more: false });

      const captured = await rest(service.url, "POST", `/payments/${paymentId}/capture`, {
        apiKey: merchant.apiKey,
        body: { amount_to_capture: 3000 },
      });
      expect(captured.body).toMatchObject({ status: "succeeded", amount_received: 3000 });
      const dispute = await reportedDispute(api, paymentId);
      expect(dispute).toMatchObject({ payment_id: paymentId, status: "opened", amount: 3000, currency: "USD", evidence: null });

      // An authorization cancelled before capture never gets a dispute.
      const cancelledPayment = await paymentWith(merchant, disputeCard, { capture_method: "manual" });
      const cancelled = await rest(service.url, "POST", `/payments/${cancelledPayment.payment_id}/cancel`, {
        apiKey: merchant.apiKey,
        body: {},
      });
      expect(cancelled.body.status).toBe("cancelled");
      await service.jobs.runDue();
      expect((await api.list({ payment_id: cancelledPayment.payment_id as string })).total_count).toBe(0);
    });

    it("sandbox open on a succeeded 4242 payment: opened for amount_received, evidence due in 7 days", async () => {
      const { merchant, api } = await merchantApi();
      const paymentId = await succeededPayment(merchant, 2500);
      const now = clock.tick();
      const dispute = await api.open(paymentId);
      expect(dispute).toEqual({
        dispute_id: expect.stringMatching(/^dis_[0-9A-Za-z]+$/),
        payment_id: paymentId,
        merchant_id: merchant.merchantId,
        status: "opened",
        amount: 2500,
        currency: "USD",
        reason: "general",
        evidence_due_by: new Date(Date.parse(now) + evidenceWindowMs).toISOString(),
        evidence: null,
        metadata: {},
        created: now,
        updated: now,
      });
      expect(await api.retrieve(dispute.dispute_id as string)).toEqual(dispute);
      expect(await retrievePayment(service.url, merchant, paymentId)).toMatchObject({ status: "succeeded", amount_received: 2500 });
    });

    it("sandbox open on a payment that has not succeeded is 400 IR_14 naming its status, and opens nothing", async () => {
      const { merchant, api } = await merchantApi();
      const unconfirmed = await paymentWith(merchant, undefined);
      const failed = await paymentWith(merchant, declined);
      const authorized = await paymentWith(merchant, visa, { capture_method: "manual" });
      expect([unconfirmed.status, failed.status, authorized.status]).toEqual(["requires_payment_method", "failed", "requires_capture"]);

      await expectError(api.open(unconfirmed.payment_id as string), "IR_14", "requires_payment_method");
      await expectError(api.open(failed.payment_id as string), "IR_14", "failed");
      await expectError(api.open(authorized.payment_id as string), "IR_14", "requires_capture");
      await expectError(api.open("pay_missing"), "HE_02", "pay_missing");
      expect(await api.list({})).toEqual({ data: [], total_count: 0, has_more: false });
    });

    it("a second dispute on the same payment is 400 IR_16; the first stays as it was", async () => {
      const { merchant, api, paymentId, dispute } = await openedDispute();
      await expectError(api.open(paymentId), "IR_16", paymentId);

      // Also on a payment whose dispute the network reported (a second later, so it lists first).
      clock.tick();
      const reported = await paymentWith(merchant, disputeCard);
      const first = await reportedDispute(api, reported.payment_id as string);
      await expectError(api.open(reported.payment_id as string), "IR_16");

      expect(await api.list({})).toEqual({ data: [first, dispute], total_count: 2, has_more: false });
    });
  });

  describe("access", () => {
    it("sandbox endpoints refuse a production key (403 IR_22), which does not see sandbox disputes either", async () => {
      const { merchant, api, paymentId, dispute } = await openedDispute();
      const production = restApi(await issueKey(service.url, merchant.merchantId, "production", "secret"));
      const disputeId = dispute.dispute_id as string;

      await expectError(production.open(paymentId), "IR_22");
      await expectError(production.resolve(disputeId, { outcome: "won" }), "IR_22");
      await expectError(production.retrieve(disputeId), "HE_02");
      await expectError(production.accept(disputeId), "HE_02");
      expect((await production.list({})).total_count).toBe(0);
      expect(await api.retrieve(disputeId)).toEqual(dispute);
    });

    it("a publishable key may not use dispute endpoints: 403 IR_22", async () => {
      const { merchant, api, paymentId, dispute } = await openedDispute();
      const publishable = restApi(await issueKey(service.url, merchant.merchantId, "sandbox", "publishable"));
      const disputeId = dispute.dispute_id as string;

      await expectError(publishable.retrieve(disputeId), "IR_22");
      await expectError(publishable.list({}), "IR_22");
      await expectError(publishable.accept(disputeId), "IR_22");
      await expectError(publishable.evidence(disputeId, { evidence: { receipt: "r" } }), "IR_22");
      await expectError(publishable.open(paymentId), "IR_22");
      await expectError(publishable.resolve(disputeId, { outcome: "won" }), "IR_22");
      expect(await api.retrieve(disputeId)).toEqual(dispute);
    });

    it("an unknown dispute, or another merchant's, is 404 HE_02 on every operation", async () => {
      const { api, paymentId, dispute } = await openedDispute();
      const disputeId = dispute.dispute_id as string;
      const stranger = (await merchantApi()).api;

      await expectError(api.retrieve("dis_missing"), "HE_02", "dis_missing");
      await expectError(stranger.retrieve(disputeId), "HE_02", disputeId);
      await expectError(stranger.accept(disputeId), "HE_02");
      await expectError(stranger.evidence(disputeId, { evidence: { receipt: "r" } }), "HE_02");
      await expectError(stranger.resolve(disputeId, { outcome: "lost" }), "HE_02");
      await expectError(stranger.open(paymentId), "HE_02");
      expect(await stranger.list({})).toEqual({ data: [], total_count: 0, has_more: false });
      expect(await stranger.list({ payment_id: paymentId })).toEqual({ data: [], total_count: 0, has_more: false });
      expect(await api.retrieve(disputeId)).toEqual(dispute);
    });
  });

  describe("accept", () => {
    it("opened → accepted with evidence null; accepting again is 400 IR_16 naming the statuses", async () => {
      const { api, dispute } = await openedDispute();
      const disputeId = dispute.dispute_id as string;
      const now = clock.tick();
      const accepted = await api.accept(disputeId);
      expect(accepted).toEqual({ ...dispute, status: "accepted", evidence: null, updated: now });
      expect(await api.retrieve(disputeId)).toEqual(accepted);

      clock.tick();
      await expectError(api.accept(disputeId), "IR_16", "accepted", "opened", "challenged");
      await expectError(api.evidence(disputeId, { evidence: { receipt: "late" } }), "IR_16", "accepted");
      await expectError(api.resolve(disputeId, { outcome: "won" }), "IR_16", "accepted", "challenged");
      expect(await api.retrieve(disputeId)).toEqual(accepted);
    });

    it("challenged → accepted: the evidence is dropped", async () => {
      const { api, dispute } = await openedDispute();
      const disputeId = dispute.dispute_id as string;
      clock.tick();
      expect((await api.evidence(disputeId, { evidence: fullEvidence })).status).toBe("challenged");
      const now = clock.tick();
      const accepted = await api.accept(disputeId);
      expect(accepted).toEqual({ ...dispute, status: "accepted", evidence: null, updated: now });
      expect(await api.retrieve(disputeId)).toEqual(accepted);
    });
  });

  describe("evidence", () => {
    it("opened → challenged with all six fields stored and returned", async () => {
      const { api, dispute } = await openedDispute();
      const disputeId = dispute.dispute_id as string;
      const now = clock.tick();
      const challenged = await api.evidence(disputeId, { evidence: fullEvidence });
      expect(challenged).toEqual({ ...dispute, status: "challenged", evidence: fullEvidence, updated: now });
      expect(await api.retrieve(disputeId)).toEqual(challenged);
    });

    it("evidence again while challenged replaces it; fields not sent are null", async () => {
      const { api, dispute } = await openedDispute();
      const disputeId = dispute.dispute_id as string;
      await api.evidence(disputeId, { evidence: fullEvidence });
      const now = clock.tick();
      const replaced = await api.evidence(disputeId, { evidence: { receipt: "Receipt #2002" } });
      expect(replaced).toEqual({
        ...dispute,
        status: "challenged",
        evidence: {
          uncategorized_text: null,
          customer_communication: null,
          receipt: "Receipt #2002",
          shipping_documentation: null,
          product_description: null,
          refund_policy: null,
        },
        updated: now,
      });
      expect(await api.retrieve(disputeId)).toEqual(replaced);
    });

    it("missing or empty evidence is 400 IR_04 naming evidence; too long a field is IR_05 naming it; nothing changes", async () => {
      const { api, dispute } = await openedDispute();
      const disputeId = dispute.dispute_id as string;
      await expectError(api.evidence(disputeId, {}), "IR_04", "evidence");
      await expectError(api.evidence(disputeId, { evidence: {} }), "IR_04", "evidence");
      await expectError(api.evidence(disputeId, { evidence: { receipt: "" } }), "IR_04", "evidence");
      await expectError(api.evidence(disputeId, { evidence: { receipt: "x".repeat(20_001) } }), "IR_05", "evidence.receipt");
      expect(await api.retrieve(disputeId)).toEqual(dispute);
      expect((await eventsOf(service, dispute.merchant_id as string, disputeId)).map((e) => e.type)).toEqual(["dispute.opened"]);
    });

    it("evidence on a decided dispute is 400 IR_16 naming its status", async () => {
      const { api, dispute } = await openedDispute();
      const disputeId = dispute.dispute_id as string;
      await api.evidence(disputeId, { evidence: fullEvidence });
      const won = await api.resolve(disputeId, { outcome: "won" });
      await expectError(api.evidence(disputeId, { evidence: { receipt: "more" } }), "IR_16", "won");
      await expectError(api.accept(disputeId), "IR_16", "won");
      expect(await api.retrieve(disputeId)).toEqual(won);
    });
  });

  describe("sandbox resolve", () => {
    it.each(["won", "lost"])("challenged → %s, the evidence kept", async (outcome) => {
      const { api, dispute } = await openedDispute();
      const disputeId = dispute.dispute_id as string;
      const challenged = await api.evidence(disputeId, { evidence: fullEvidence });
      const now = clock.tick();
      const resolved = await api.resolve(disputeId, { outcome });
      expect(resolved).toEqual({ ...challenged, status: outcome, updated: now });
      expect(await api.retrieve(disputeId)).toEqual(resolved);

      // Final: neither resolving again nor the other outcome changes it.
      await expectError(api.resolve(disputeId, { outcome }), "IR_16", outcome, "challenged");
      await expectError(api.resolve(disputeId, { outcome: outcome === "won" ? "lost" : "won" }), "IR_16", outcome);
      expect(await api.retrieve(disputeId)).toEqual(resolved);
    });

    it("resolving an opened dispute is 400 IR_16 naming opened and challenged", async () => {
      const { api, dispute } = await openedDispute();
      const disputeId = dispute.dispute_id as string;
      await expectError(api.resolve(disputeId, { outcome: "won" }), "IR_16", "opened", "challenged");
      await expectError(api.resolve(disputeId, { outcome: "lost" }), "IR_16", "opened", "challenged");
      expect(await api.retrieve(disputeId)).toEqual(dispute);
    });

    it("a missing or unset outcome is 400 IR_04 naming outcome; the dispute stays challenged", async () => {
      const { api, dispute } = await openedDispute();
      const disputeId = dispute.dispute_id as string;
      const challenged = await api.evidence(disputeId, { evidence: fullEvidence });
      await expectError(api.resolve(disputeId, {}), "IR_04", "outcome");
      await expectError(api.resolve(disputeId, { outcome: null }), "IR_04", "outcome");
      expect(await api.retrieve(disputeId)).toEqual(challenged);
    });
  });

  describe("expiry", () => {
    it("an opened dispute without evidence expires once the clock passes evidence_due_by; a challenged one does not", async () => {
      const { api, dispute } = await openedDispute();
      const { dispute: challengedOne, api: otherApi } = await openedDispute();
      const disputeId = dispute.dispute_id as string;
      const challenged = await otherApi.evidence(challengedOne.dispute_id as string, { evidence: fullEvidence });
      const due = Date.parse(dispute.evidence_due_by as string);

      // A minute before the deadline nothing happens.
      clock.advance(due - clock.now().getTime() - 60_000);
      await service.jobs.runDue();
      expect(await api.retrieve(disputeId)).toEqual(dispute);

      clock.advance(2 * 60_000);
      const expiredAt = clock.now().toISOString();
      await service.jobs.runDue();
      const expired = await api.retrieve(disputeId);
      expect(expired).toEqual({ ...dispute, status: "expired", evidence: null, updated: expiredAt });
      expect(await otherApi.retrieve(challengedOne.dispute_id as string)).toEqual(challenged);
      expect((await api.list({ status: "expired" })).data).toEqual([expired]);

      // Expired is final.
      await expectError(api.accept(disputeId), "IR_16", "expired");
      await expectError(api.evidence(disputeId, { evidence: fullEvidence }), "IR_16", "expired");
      expect((await eventsOf(service, dispute.merchant_id as string, disputeId)).at(-1)).toEqual({
        type: "dispute.expired",
        object: expired,
      });
    });

    it("evidence sent after evidence_due_by is refused with 400 IR_16, even before the expiry has run", async () => {
      const { api, dispute } = await openedDispute();
      const disputeId = dispute.dispute_id as string;
      clock.advance(Date.parse(dispute.evidence_due_by as string) - clock.now().getTime() + 1000);

      await expectError(api.evidence(disputeId, { evidence: fullEvidence }), "IR_16", "evidence_due_by");
      await service.jobs.runDue();
      expect((await api.retrieve(disputeId)).status).toBe("expired");
    });
  });

  describe("events", () => {
    it("each status writes dispute.<status> whose data.object is what retrieve returned then", async () => {
      const { merchant, api, dispute } = await openedDispute();
      const disputeId = dispute.dispute_id as string;
      clock.tick();
      const challenged = await api.evidence(disputeId, { evidence: fullEvidence });
      expect(await api.retrieve(disputeId)).toEqual(challenged);
      clock.tick();
      const accepted = await api.accept(disputeId);
      expect(await api.retrieve(disputeId)).toEqual(accepted);
      expect(await eventsOf(service, merchant.merchantId, disputeId)).toEqual([
        { type: "dispute.opened", object: dispute },
        { type: "dispute.challenged", object: challenged },
        { type: "dispute.accepted", object: accepted },
      ]);

      for (const outcome of ["won", "lost"]) {
        const scene = await openedDispute();
        const id = scene.dispute.dispute_id as string;
        clock.tick();
        const evidenced = await scene.api.evidence(id, { evidence: { uncategorized_text: "see attached" } });
        clock.tick();
        const resolved = await scene.api.resolve(id, { outcome });
        expect(await scene.api.retrieve(id)).toEqual(resolved);
        expect(await eventsOf(service, scene.merchant.merchantId, id)).toEqual([
          { type: "dispute.opened", object: scene.dispute },
          { type: "dispute.challenged", object: evidenced },
          { type: `dispute.${outcome}`, object: resolved },
        ]);
      }
    });

    it("a refused request writes no event", async () => {
      const { merchant, api, paymentId, dispute } = await openedDispute();
      const disputeId = dispute.dispute_id as string;
      await expectError(api.resolve(disputeId, { outcome: "won" }), "IR_16");
      await expectError(api.evidence(disputeId, { evidence: {} }), "IR_04");
      await expectError(api.open(paymentId), "IR_16");
      expect(await eventsOf(service, merchant.merchantId, disputeId)).toEqual([{ type: "dispute.opened", object: dispute }]);
    });
  });
});

describe.each(["POST", "GET"] as const)("listing disputes with %s", (listWith) => {
  /** Three disputes of one merchant, opened a second apart: [oldest, middle, newest]. */
  async function threeDisputes(): Promise<{ api: DisputeApi; merchant: TestMerchant; disputes: Json[] }> {
    const { merchant, api } = await merchantApi(listWith);
    const writer = restApi(merchant.apiKey);
    const disputes: Json[] = [];
    for (let i = 0; i < 3; i++) {
      const paymentId = await succeededPayment(merchant, 1000 + i);
      clock.tick();
      disputes.push(await writer.open(paymentId));
    }
    return { api, merchant, disputes };
  }

  it("lists newest first with exact total_count and has_more across pages", async () => {
    const { api, disputes } = await threeDisputes();
    const [d1, d2, d3] = disputes;
    expect(await api.list({})).toEqual({ data: [d3, d2, d1], total_count: 3, has_more: false });
    expect(await api.list({ limit: 2 })).toEqual({ data: [d3, d2], total_count: 3, has_more: true });
    expect(await api.list({ limit: 2, offset: 2 })).toEqual({ data: [d1], total_count: 3, has_more: false });
    expect(await api.list({ limit: 1, offset: 1 })).toEqual({ data: [d2], total_count: 3, has_more: true });
    expect(await api.list({ offset: 3 })).toEqual({ data: [], total_count: 3, has_more: false });
    expect(await api.list({ created_gte: d2!.created!, created_lte: d2!.created! })).toEqual({
      data: [d2],
      total_count: 1,
      has_more: false,
    });
  });

  it("filters by status and payment_id, alone and together", async () => {
    const { api, merchant, disputes } = await threeDisputes();
    const writer = restApi(merchant.apiKey);
    const [d1, d2, d3] = disputes;
    clock.tick();
    const challenged = await writer.evidence(d1!.dispute_id as string, { evidence: fullEvidence });
    clock.tick();
    const accepted = await writer.accept(d2!.dispute_id as string);

    expect(await api.list({ status: "opened" })).toEqual({ data: [d3], total_count: 1, has_more: false });
    expect(await api.list({ status: "challenged" })).toEqual({ data: [challenged], total_count: 1, has_more: false });
    expect(await api.list({ status: "accepted" })).toEqual({ data: [accepted], total_count: 1, has_more: false });
    expect(await api.list({ status: "won" })).toEqual({ data: [], total_count: 0, has_more: false });
    expect(await api.list({ payment_id: d2!.payment_id! })).toEqual({ data: [accepted], total_count: 1, has_more: false });
    expect(await api.list({ payment_id: d2!.payment_id!, status: "accepted" })).toEqual({
      data: [accepted],
      total_count: 1,
      has_more: false,
    });
    expect(await api.list({ payment_id: d2!.payment_id!, status: "opened" })).toEqual({ data: [], total_count: 0, has_more: false });
    expect(await api.list({ payment_id: "pay_none" })).toEqual({ data: [], total_count: 0, has_more: false });
    expect(ids(await api.list({ limit: 2 }))).toEqual([d3!.dispute_id, d2!.dispute_id]);
  });

  it.each([0, 101])("refuses limit %d with 400 IR_06; offset -1 is IR_05 naming offset", async (limit) => {
    const { api } = await merchantApi(listWith);
    await expectError(api.list({ limit }), "IR_06", "limit");
    await expectError(api.list({ offset: -1 }), "IR_05", "offset");
  });
});

describe("disputes and refunds (decisions §4 'full amount', §9)", () => {
  const api = (merchant: TestMerchant) => restApi(merchant.apiKey);

  it("while a dispute is opened or challenged, a refund is 400 IR_16 and none is created", async () => {
    const { merchant, paymentId, dispute } = await openedDispute();
    expectRestError(await createRefund(merchant, paymentId), 400, "IR_16");
    expectRestError(await createRefund(merchant, paymentId, 1), 400, "IR_16");
    await api(merchant).evidence(dispute.dispute_id as string, { evidence: fullEvidence });
    const message = expectRestError(await createRefund(merchant, paymentId, 1), 400, "IR_16");
    expect(message).toMatch(/dispute/);
    expect(await refundCount(merchant, paymentId)).toBe(0);
  });

  it("after a won dispute the payment is refundable again in full", async () => {
    const { merchant, paymentId, dispute } = await openedDispute();
    await api(merchant).evidence(dispute.dispute_id as string, { evidence: fullEvidence });
    await api(merchant).resolve(dispute.dispute_id as string, { outcome: "won" });
    expectRestError(await createRefund(merchant, paymentId, 5001), 400, "IR_13");
    const refund = await createRefund(merchant, paymentId);
    expect(refund.status, JSON.stringify(refund.body)).toBe(200);
    expect(refund.body).toMatchObject({ payment_id: paymentId, amount: 5000, currency: "USD" });
    expectRestError(await createRefund(merchant, paymentId, 1), 400, "IR_13");
  });

  it.each(["lost", "accepted", "expired"])("after a %s dispute nothing is left to refund (400 IR_13)", async (outcome) => {
    const { merchant, paymentId, dispute } = await openedDispute();
    const disputeId = dispute.dispute_id as string;
    if (outcome === "lost") {
      await api(merchant).evidence(disputeId, { evidence: fullEvidence });
      await api(merchant).resolve(disputeId, { outcome: "lost" });
    } else if (outcome === "accepted") {
      await api(merchant).accept(disputeId);
    } else {
      clock.advance(evidenceWindowMs + 60_000);
      await service.jobs.runDue();
    }
    expect((await api(merchant).retrieve(disputeId)).status).toBe(outcome);
    expectRestError(await createRefund(merchant, paymentId), 400, "IR_13");
    expectRestError(await createRefund(merchant, paymentId, 1), 400, "IR_13");
    expect(await refundCount(merchant, paymentId)).toBe(0);
  });

  it("a partial refund made before the dispute opened still counts after a won dispute", async () => {
    const { merchant } = await merchantApi();
    const paymentId = await succeededPayment(merchant);
    const first = await createRefund(merchant, paymentId, 1000);
    expect(first.status, JSON.stringify(first.body)).toBe(200);

    const dispute = await api(merchant).open(paymentId);
    expect(dispute).toMatchObject({ status: "opened", amount: 5000 });
    expectRestError(await createRefund(merchant, paymentId, 1), 400, "IR_16");
    await api(merchant).evidence(dispute.dispute_id as string, { evidence: fullEvidence });
    await api(merchant).resolve(dispute.dispute_id as string, { outcome: "won" });

    expectRestError(await createRefund(merchant, paymentId, 4001), 400, "IR_13");
    const rest2 = await createRefund(merchant, paymentId);
    expect(rest2.status, JSON.stringify(rest2.body)).toBe(200);
    expect(rest2.body.amount).toBe(4000);
    expect(await refundCount(merchant, paymentId)).toBe(2);
  });

  it("a partial refund made before a lost dispute: still nothing left, never a negative amount", async () => {
    const { merchant } = await merchantApi();
    const paymentId = await succeededPayment(merchant);
    expect((await createRefund(merchant, paymentId, 1000)).status).toBe(200);
    const dispute = await api(merchant).open(paymentId);
    await api(merchant).accept(dispute.dispute_id as string);
    expectRestError(await createRefund(merchant, paymentId), 400, "IR_13");
    expect(await refundCount(merchant, paymentId)).toBe(1);
  });
});

describe("disputes over RPC only", () => {
  it("an explicit DISPUTE_OUTCOME_UNSPECIFIED over Connect is no outcome: IR_04 naming outcome, still challenged", async () => {
    const { merchant, api, dispute } = await openedDispute();
    const disputeId = dispute.dispute_id as string;
    const challenged = await api.evidence(disputeId, { evidence: fullEvidence });
    const sandbox = rpcClient(SandboxService, service.url, "connect", { apiKey: merchant.apiKey });
    await expectError(sandbox.resolveDispute({ disputeId, outcome: DisputeOutcome.UNSPECIFIED }), "IR_04", "outcome");
    expect(await api.retrieve(disputeId)).toEqual(challenged);
  });
});

/*
 * Races between two instances sharing one PostgreSQL database. The embedded database serializes every
 * statement, so these only exist on real PostgreSQL: skipped without DATABASE_URL.
 */
describe.skipIf(!onPostgres)(
  "dispute races between two instances on one PostgreSQL (PostgreSQL only: the embedded database serializes)",
  () => {
    const { a, b, instance } = servicePair(noPolling, clock);

    const trials = 12;

    function call(on: TestService, merchant: TestMerchant, method: string, path: string, body?: Json): Promise<RestResponse> {
      return rest(on.url, method, path, { apiKey: merchant.apiKey, body });
    }

    /** The types of a dispute's events, sorted: racing changes share one clock reading, so their order is not stored. */
    async function eventTypes(merchant: TestMerchant, disputeId: string): Promise<string[]> {
      return (await eventsOf(service, merchant.merchantId, disputeId)).map((e) => e.type).sort();
    }

    function summary(responses: RestResponse[]): string {
      return responses.map((r) => `${r.status} ${r.body?.error?.code ?? r.body?.status}`).join(", ");
    }

    /** `trials` succeeded payments of 5000 USD, each with an opened sandbox dispute (optionally challenged). */
    async function disputedPayments(merchant: TestMerchant, challenge: boolean): Promise<Json[]> {
      return Promise.all(
        Array.from({ length: trials }, async (_, i) => {
          const paymentId = await succeededPayment(merchant);
          const opened = await call(instance(i), merchant, "POST", `/sandbox/payments/${paymentId}/dispute`);
          expect(opened.status, JSON.stringify(opened.body)).toBe(200);
          if (!challenge) return opened.body;
          const challenged = await call(instance(i + 1), merchant, "POST", `/disputes/${opened.body.dispute_id}/evidence`, {
            evidence: fullEvidence,
          });
          expect(challenged.body.status).toBe("challenged");
          return challenged.body;
        }),
      );
    }

    async function refundsOf(merchant: TestMerchant, paymentId: string): Promise<Json[]> {
      const res = await call(a, merchant, "GET", `/refunds/list?payment_id=${paymentId}`);
      expect(res.status).toBe(200);
      return res.body.data;
    }

    it("accept vs refund on an opened dispute: the accept always wins, the refund never creates anything", async () => {
      const merchant = await newMerchant(a.url);
      const disputes = await disputedPayments(merchant, false);
      const raced = await Promise.all(
        disputes.map((d, i) =>
          Promise.all([
            call(instance(i), merchant, "POST", `/disputes/${d.dispute_id}/accept`),
            call(instance(i + 1), merchant, "POST", "/refunds", { payment_id: d.payment_id! }),
          ]),
        ),
      );
      for (const [i, [accept, refund]] of raced.entries()) {
        const d = disputes[i]!;
        expect(accept.status, summary([accept, refund])).toBe(200);
        expect(accept.body).toMatchObject({ status: "accepted", evidence: null });
        // Before the accept the dispute was open (IR_16); after it nothing is left (IR_13).
        expect(["IR_16", "IR_13"], summary([accept, refund])).toContain(refund.body?.error?.code);
        expect(refund.status).toBe(400);
        expect(await refundsOf(merchant, d.payment_id as string)).toEqual([]);
        expect(await eventTypes(merchant, d.dispute_id as string)).toEqual(["dispute.opened", "dispute.accepted"].sort());
      }
    });

    it("resolve won vs full refund on a challenged dispute: the refund either saw the dispute open or got the full amount", async () => {
      const merchant = await newMerchant(a.url);
      const disputes = await disputedPayments(merchant, true);
      const raced = await Promise.all(
        disputes.map((d, i) =>
          Promise.all([
            call(instance(i), merchant, "POST", `/sandbox/disputes/${d.dispute_id}/resolve`, { outcome: "won" }),
            call(instance(i + 1), merchant, "POST", "/refunds", { payment_id: d.payment_id! }),
          ]),
        ),
      );
      for (const [i, [resolve, refund]] of raced.entries()) {
        const d = disputes[i]!;
        expect(resolve.status, summary([resolve, refund])).toBe(200);
        expect(resolve.body).toMatchObject({ status: "won", evidence: fullEvidence });
        const refunds = await refundsOf(merchant, d.payment_id as string);
        if (refund.status === 200) {
          expect(refund.body).toMatchObject({ payment_id: d.payment_id, amount: 5000 });
          expect(refunds.map((r) => r.refund_id)).toEqual([refund.body.refund_id]);
        } else {
          expectRestError(refund, 400, "IR_16");
          expect(refunds).toEqual([]);
        }
        const stored = await call(instance(i + 1), merchant, "GET", `/disputes/${d.dispute_id}`);
        expect(stored.body).toEqual(resolve.body);
        expect(await eventTypes(merchant, d.dispute_id as string)).toEqual(["dispute.opened", "dispute.challenged", "dispute.won"].sort());
      }
    });

    it("accept vs evidence on an opened dispute: always accepted in the end, evidence null, the events of what happened", async () => {
      const merchant = await newMerchant(a.url);
      const disputes = await disputedPayments(merchant, false);
      const raced = await Promise.all(
        disputes.map((d, i) =>
          Promise.all([
            call(instance(i), merchant, "POST", `/disputes/${d.dispute_id}/accept`),
            call(instance(i + 1), merchant, "POST", `/disputes/${d.dispute_id}/evidence`, { evidence: fullEvidence }),
          ]),
        ),
      );
      for (const [i, [accept, evidence]] of raced.entries()) {
        const d = disputes[i]!;
        // Accepting works from opened and from challenged, so the accept always succeeds; the
        // evidence succeeds only if it came first.
        expect(accept.status, summary([accept, evidence])).toBe(200);
        expect(accept.body).toMatchObject({ status: "accepted", evidence: null });
        const stored = await call(instance(i + 1), merchant, "GET", `/disputes/${d.dispute_id}`);
        expect(stored.body).toEqual(accept.body);
        const types = await eventTypes(merchant, d.dispute_id as string);
        if (evidence.status === 200) {
          expect(evidence.body).toMatchObject({ status: "challenged", evidence: fullEvidence });
          expect(types).toEqual(["dispute.opened", "dispute.challenged", "dispute.accepted"].sort());
        } else {
          expectRestError(evidence, 400, "IR_16");
          expect(types).toEqual(["dispute.opened", "dispute.accepted"].sort());
        }
      }
    });

    it("accept vs resolve on a challenged dispute: exactly one wins, the other gets IR_16", async () => {
      const merchant = await newMerchant(a.url);
      const disputes = await disputedPayments(merchant, true);
      const raced = await Promise.all(
        disputes.map((d, i) =>
          Promise.all([
            call(instance(i), merchant, "POST", `/disputes/${d.dispute_id}/accept`),
            call(instance(i + 1), merchant, "POST", `/sandbox/disputes/${d.dispute_id}/resolve`, { outcome: "lost" }),
          ]),
        ),
      );
      for (const [i, [accept, resolve]] of raced.entries()) {
        const d = disputes[i]!;
        const winners = [accept, resolve].filter((r) => r.status === 200);
        expect(winners, summary([accept, resolve])).toHaveLength(1);
        const loser = winners[0] === accept ? resolve : accept;
        expectRestError(loser, 400, "IR_16");
        const final = winners[0] === accept ? "accepted" : "lost";
        const stored = await call(a, merchant, "GET", `/disputes/${d.dispute_id}`);
        expect(stored.body).toEqual(winners[0]!.body);
        expect(stored.body.status).toBe(final);
        expect(await eventTypes(merchant, d.dispute_id as string)).toEqual(
          ["dispute.opened", "dispute.challenged", `dispute.${final}`].sort(),
        );
      }
    });

    it("two sandbox opens of one payment on two instances: exactly one dispute, the other gets IR_16", async () => {
      const merchant = await newMerchant(a.url);
      const payments = await Promise.all(Array.from({ length: trials }, () => succeededPayment(merchant)));
      const raced = await Promise.all(
        payments.map((paymentId, i) =>
          Promise.all([
            call(instance(i), merchant, "POST", `/sandbox/payments/${paymentId}/dispute`),
            call(instance(i + 1), merchant, "POST", `/sandbox/payments/${paymentId}/dispute`),
          ]),
        ),
      );
      for (const [i, responses] of raced.entries()) {
        const winners = responses.filter((r) => r.status === 200);
        expect(winners, summary(responses)).toHaveLength(1);
        expectRestError(responses.find((r) => r.status !== 200)!, 400, "IR_16");
        const list = await call(a, merchant, "GET", `/disputes/list?payment_id=${payments[i]}`);
        expect(list.body).toEqual({ data: [winners[0]!.body], total_count: 1, has_more: false });
      }
    });

    it("the dispute card's reported disputes open once when both instances' runners race for the jobs", async () => {
      const merchant = await newMerchant(a.url);
      const payments = await Promise.all(
        Array.from({ length: trials }, (_, i) =>
          rest(instance(i).url, "POST", "/payments", {
            apiKey: merchant.apiKey,
            body: {
              amount: 700 + i,
              currency: "USD",
              profile_id: merchant.profileId,
              confirm: true,
              payment_method_data: card(disputeCard),
            },
          }),
        ),
      );
      await Promise.all([a.jobs.runDue(), b.jobs.runDue(), a.jobs.runDue(), b.jobs.runDue()]);
      const disputes = restApi(merchant.apiKey);
      for (const [i, payment] of payments.entries()) {
        expect(payment.body.status).toBe("succeeded");
        const dispute = await reportedDispute(disputes, payment.body.payment_id);
        expect(dispute).toMatchObject({ status: "opened", amount: 700 + i });
        expect(await eventTypes(merchant, dispute.dispute_id as string)).toEqual(["dispute.opened"]);
      }
    });
  },
);
