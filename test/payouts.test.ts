import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { rest } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { expectRestError } from "./support/errors.js";
import { eventsOf } from "./support/events.js";
import { isoUtc } from "./support/formats.js";
import { issueKey, newMerchant, type TestMerchant } from "./support/merchant.js";
import { payoutAccounts as accounts, payoutBodies, payoutCards as cards } from "./support/payout-destinations.js";
import { expectError, type Json, query, restCaller, restList } from "./support/resource-api.js";
import { runningService } from "./support/running.js";
import { noPolling } from "./support/service.js";
import { waitUntil } from "./support/wait.js";

/*
 * Payouts (interface §2 Payout, §3 payout statuses, §4 create/update/retrieve/fulfill; decisions §3
 * sandbox payout destinations, §5 errors, §7 lists, §8 events, §9 payouts; docs/payouts.md for the
 * routing table and the scripted sandbox destinations), each scenario once, over REST: it talks to a
 * small PayoutApi that sends the documented JSON. That every RPC carries the same request and answer
 * over Connect, gRPC and gRPC-Web is the protocol-parity suite's subject (test/parity).
 *
 * The service runs on a TestClock with the background poll out of reach. A confirmed payout is still
 * sent right after its commit (the runner is woken), as a leased job that may be running on the
 * instance's own runner at any moment: tests never rely on runDue() having sent it, they run due jobs
 * and retrieve the payout until it reaches a final status.
 */

const clock = new TestClock();
const service = runningService(noPolling, clock);

const finalStatuses = new Set(["success", "failed", "cancelled"]);

/** The payout operations, as seen by a caller; results use the REST field names. */
interface PayoutApi {
  create(body: Json): Promise<Json>;
  update(payoutId: string, body: Json): Promise<Json>;
  retrieve(payoutId: string): Promise<Json>;
  fulfill(payoutId: string): Promise<Json>;
  cancel(payoutId: string): Promise<Json>;
  list(params: Json): Promise<Json>;
}

function restApi(apiKey: string, listWith: "GET" | "POST" = "POST"): PayoutApi {
  const call = restCaller(service.url, apiKey);
  const at = (id: string) => `/payouts/${encodeURIComponent(id)}`;
  return {
    create: (body) => call("POST", "/payouts/create", body),
    update: (id, body) => call("POST", at(id), body),
    retrieve: (id) => call("GET", at(id)),
    fulfill: (id) => call("POST", `${at(id)}/fulfill`),
    cancel: (id) => call("POST", `${at(id)}/cancel`),
    list: restList(call, listWith, "/payouts/list"),
  };
}

/** A fresh merchant (sandbox secret key) and its PayoutApi, so each scenario works in a merchant of its own. */
async function merchantApi(listWith: "GET" | "POST" = "POST"): Promise<{ merchant: TestMerchant; api: PayoutApi }> {
  const merchant = await newMerchant(service.url);
  return { merchant, api: restApi(merchant.apiKey, listWith) };
}

/** An expiry year `years` from the service's clock (negative: already past). */
function yearFromNow(years: number): string {
  return String(clock.now().getUTCFullYear() + years);
}

const { cardMethod, bankMethod, cardPayout, bankPayout } = payoutBodies(() => clock.now());

/** A deep copy of `body` without the field at the dotted `path` (a required field left out). */
function without(body: Json, path: string): Json {
  const copy = structuredClone(body);
  const keys = path.split(".");
  let target: Json = copy;
  for (const key of keys.slice(0, -1)) target = target[key] as Json;
  delete target[keys.at(-1)!];
  return copy;
}

/** A customer of the merchant, created through /customers. */
async function newCustomer(apiKey: string, body: Json = { name: "Ada Lovelace" }): Promise<string> {
  const res = await rest(service.url, "POST", "/customers", { apiKey, body });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.customer_id as string;
}

/**
 * Waits for a payout to reach a final status: runs due jobs (the instance's own runner may hold the
 * sending job at that moment, then runDue() finds nothing and the next retrieve tells) and retrieves
 * it, a bounded number of times. Returns the payout as retrieved then.
 */
function settled(api: PayoutApi, payoutId: string, tries = 300): Promise<Json> {
  return waitUntil(
    async () => {
      await service.jobs.runDue();
      const payout = await api.retrieve(payoutId);
      if (!finalStatuses.has(payout.status as string)) await sleep(10);
      return payout;
    },
    (payout) => finalStatuses.has(payout.status as string),
    tries,
  );
}

/** The order a payout enters its statuses in; events at the same clock instant are sorted by it. */
const statusRank: Record<string, number> = { requires_fulfillment: 0, pending: 1, success: 2, failed: 2, cancelled: 2 };

/** A payout event's place in that order. */
const payoutOrder = (type: string) => statusRank[type.replace(/^payout\./, "")] ?? 99;

/** Every payout and payout event of a merchant, to show that a refused request left nothing behind. */
async function payoutRowsOf(merchantId: string): Promise<{ payouts: number; events: number }> {
  const [payouts] = await service.app.dataSource.query("SELECT count(*) AS n FROM payouts WHERE merchant_id = $1", [merchantId]);
  const [events] = await service.app.dataSource.query(
    "SELECT count(*) AS n FROM events WHERE merchant_id = $1 AND starts_with(type, 'payout.')",
    [merchantId],
  );
  return { payouts: Number(payouts.n), events: Number(events.n) };
}

/** The stored row of a payout: its encrypted destination and the whole row as text. */
async function storedPayout(merchantId: string, payoutId: string): Promise<{ status: string; ciphertext: string | null; row: string }> {
  const [found]: Array<{ status: string; destination_ciphertext: string | null; row: string }> = await service.app.dataSource.query(
    "SELECT p.status, p.destination_ciphertext, row_to_json(p)::text AS row FROM payouts p WHERE merchant_id = $1 AND payout_id = $2",
    [merchantId, payoutId],
  );
  expect(found, `payout ${payoutId} is stored`).toBeDefined();
  return { status: found!.status, ciphertext: found!.destination_ciphertext, row: found!.row };
}

/** One attempt as responses show it; `created` when the test knows the clock time it was made at. */
function attempt(processor: string, status: string, error: { code: string } | null = null, created?: string): Json {
  return {
    attempt_id: expect.stringMatching(/^att_[0-9A-Za-z]+$/),
    status,
    processor,
    error_code: error === null ? null : error.code,
    error_message: error === null ? null : expect.stringMatching(/\S/),
    created: created ?? expect.stringMatching(isoUtc),
  } as unknown as Json;
}

const ids = (list: Json) => (list.data as Json[]).map((p) => p.payout_id);

describe("payouts", () => {
  describe("create and send", () => {
    it("answers pending with the full payout (masked card, billing, recipient, customer); the card 4242… is then sent: success, one attempt", async () => {
      const { merchant, api } = await merchantApi();
      const customerId = await newCustomer(merchant.apiKey);
      const now = clock.tick();
      const created = await api.create(
        cardPayout(merchant, cards.succeeds, {
          amount: 2500,
          currency: "eur",
          customer_id: customerId,
          email: "ada@example.com",
          name: "Ada Lovelace",
          phone: "020 7946 0000",
          billing: {
            address: { line1: "1 Analytical Way", city: "London", state: "Greater London", postal_code: "N1 9GU", country: "gb" },
            email: "billing@example.com",
          },
          metadata: { order: "A-1" },
        }),
      );
      expect(created).toEqual({
        payout_id: expect.stringMatching(/^po_[0-9A-Za-z]+$/),
        merchant_id: merchant.merchantId,
        profile_id: merchant.profileId,
        customer_id: customerId,
        status: "pending",
        amount: 2500,
        currency: "EUR",
        payout_type: "card",
        priority: "regular",
        email: "ada@example.com",
        name: "Ada Lovelace",
        phone: "020 7946 0000",
        payout_method_data: { card: { last4: "4242", exp_month: "12", exp_year: yearFromNow(3) }, bank: null },
        billing: {
          address: {
            line1: "1 Analytical Way",
            line2: null,
            city: "London",
            state: "Greater London",
            postal_code: "N1 9GU",
            country: "GB",
          },
          phone: null,
          email: "billing@example.com",
        },
        processor: "sandbox_card",
        confirm: true,
        error_code: null,
        error_message: null,
        attempts: [],
        metadata: { order: "A-1" },
        created: now,
        updated: now,
      });

      const done = await settled(api, created.payout_id as string);
      expect(done).toEqual({ ...created, status: "success", attempts: [attempt("sandbox_card", "success", null, now)] });
      expect(await api.retrieve(created.payout_id as string)).toEqual(done);
    });

    it("a bank account 000123456789 is sent by sandbox_ach: success, the account masked to its last four digits", async () => {
      const { api, merchant } = await merchantApi();
      const created = await api.create(bankPayout(merchant, accounts.succeeds));
      expect(created).toMatchObject({
        status: "pending",
        payout_type: "bank",
        processor: "sandbox_ach",
        customer_id: null,
        billing: null,
        payout_method_data: { card: null, bank: { last4: "6789", bank_name: "Sandbox Bank" } },
      });
      const done = await settled(api, created.payout_id as string);
      expect(done).toEqual({ ...created, status: "success", attempts: [attempt("sandbox_ach", "success")] });
    });

    it.each([
      ["card 4000000000000002", "card_declined", "sandbox_card", (m: TestMerchant) => cardPayout(m, cards.declined)],
      ["card 4000000000009995", "insufficient_funds", "sandbox_card", (m: TestMerchant) => cardPayout(m, cards.insufficientFunds)],
      ["bank account 000111111116", "account_closed", "sandbox_ach", (m: TestMerchant) => bankPayout(m, accounts.closed)],
    ])("%s → failed with error_code %s and an error_message, after one attempt on %s", async (_, errorCode, processor, body) => {
      const { merchant, api } = await merchantApi();
      const created = await api.create(body(merchant));
      expect(created).toMatchObject({ status: "pending", error_code: null, error_message: null });
      const failed = await settled(api, created.payout_id as string);
      expect(failed).toEqual({
        ...created,
        status: "failed",
        error_code: errorCode,
        error_message: expect.stringMatching(/\S/),
        attempts: [attempt(processor, "failed", { code: errorCode })],
      });
      // The payout carries the error of the attempt that ended it.
      expect(failed.error_message).toBe((failed.attempts as Json[])[0]!.error_message);
    });
  });

  describe("routing and failover", () => {
    it("card 4000000000000119 with priority fast: sandbox_instant fails (processing_error), sandbox_card sends it", async () => {
      const { merchant, api } = await merchantApi();
      const created = await api.create(cardPayout(merchant, cards.instantFails, { priority: "fast" }));
      expect(created).toMatchObject({ status: "pending", priority: "fast", processor: "sandbox_instant" });
      const done = await settled(api, created.payout_id as string);
      expect(done).toEqual({
        ...created,
        status: "success",
        processor: "sandbox_card",
        attempts: [attempt("sandbox_instant", "failed", { code: "processing_error" }), attempt("sandbox_card", "success")],
      });
      const [first, second] = done.attempts as Json[];
      expect(first!.attempt_id).not.toBe(second!.attempt_id);
    });

    it("bank account 000222222227 (USD, regular): sandbox_ach is unavailable, sandbox_swift sends it", async () => {
      const { merchant, api } = await merchantApi();
      const created = await api.create(bankPayout(merchant, accounts.achUnavailable));
      expect(created.processor).toBe("sandbox_ach");
      const done = await settled(api, created.payout_id as string);
      expect(done).toEqual({
        ...created,
        status: "success",
        processor: "sandbox_swift",
        attempts: [attempt("sandbox_ach", "failed", { code: "processor_unavailable" }), attempt("sandbox_swift", "success")],
      });
    });

    it("bank account 000333333335: every rail fails, the payout fails with processor_unavailable after one attempt per rail", async () => {
      const { merchant, api } = await merchantApi();
      const created = await api.create(bankPayout(merchant, accounts.allUnavailable));
      const failed = await settled(api, created.payout_id as string);
      expect(failed).toEqual({
        ...created,
        status: "failed",
        processor: "sandbox_swift",
        error_code: "processor_unavailable",
        error_message: expect.stringMatching(/\S/),
        attempts: [
          attempt("sandbox_ach", "failed", { code: "processor_unavailable" }),
          attempt("sandbox_swift", "failed", { code: "processor_unavailable" }),
        ],
      });
    });

    it("an instant card payout of exactly 500000 goes to sandbox_instant; 500001 is 400 IR_05 naming amount", async () => {
      const { merchant, api } = await merchantApi();
      const created = await api.create(cardPayout(merchant, cards.succeeds, { amount: 500_000, priority: "instant" }));
      expect(created).toMatchObject({ priority: "instant", processor: "sandbox_instant" });
      const done = await settled(api, created.payout_id as string);
      expect(done).toMatchObject({ status: "success", processor: "sandbox_instant", attempts: [attempt("sandbox_instant", "success")] });

      await expectError(
        api.create(cardPayout(merchant, cards.succeeds, { amount: 500_001, priority: "instant" })),
        "IR_05",
        "amount",
        "500000",
      );
      expect((await api.list({})).total_count).toBe(1);
    });

    it("a bank payout in EUR goes to sandbox_swift (sandbox_ach sends USD only)", async () => {
      const { merchant, api } = await merchantApi();
      const created = await api.create(bankPayout(merchant, accounts.succeeds, { currency: "EUR" }));
      expect(created.processor).toBe("sandbox_swift");
      expect(await settled(api, created.payout_id as string)).toMatchObject({
        status: "success",
        attempts: [attempt("sandbox_swift", "success")],
      });
    });

    it("a preferred processor that can send the payout is tried first", async () => {
      const { merchant, api } = await merchantApi();
      const created = await api.create(bankPayout(merchant, accounts.succeeds, { processor: "sandbox_swift" }));
      expect(created).toMatchObject({ status: "pending", processor: "sandbox_swift" });
      const done = await settled(api, created.payout_id as string);
      expect(done).toEqual({ ...created, status: "success", attempts: [attempt("sandbox_swift", "success")] });
    });

    it("an unknown or ineligible preferred processor is 400 IR_05 naming processor, and nothing is written", async () => {
      const { merchant, api } = await merchantApi();
      await expectError(api.create(bankPayout(merchant, accounts.succeeds, { processor: "acme_bank" })), "IR_05", "processor", "acme_bank");
      await expectError(
        api.create(bankPayout(merchant, accounts.succeeds, { currency: "EUR", processor: "sandbox_ach" })),
        "IR_05",
        "processor",
        "sandbox_ach",
      );
      await expectError(api.create(cardPayout(merchant, cards.succeeds, { processor: "sandbox_swift" })), "IR_05", "processor");
      expect(await payoutRowsOf(merchant.merchantId)).toEqual({ payouts: 0, events: 0 });
    });

    it("no processor for the request is 400 IR_05 naming the field: wire for a card, a wallet payout", async () => {
      const { merchant, api } = await merchantApi();
      await expectError(api.create(cardPayout(merchant, cards.succeeds, { priority: "wire" })), "IR_05", "priority");
      await expectError(api.create(cardPayout(merchant, cards.succeeds, { payout_type: "wallet" })), "IR_05", "payout_type");
      expect(await payoutRowsOf(merchant.merchantId)).toEqual({ payouts: 0, events: 0 });
    });
  });

  describe("fulfill and cancel", () => {
    it("confirm false → requires_fulfillment, never sent until fulfilled; fulfill → pending, then success", async () => {
      const { merchant, api } = await merchantApi();
      const heldAt = clock.tick();
      const held = await api.create(bankPayout(merchant, accounts.succeeds, { confirm: false }));
      expect(held).toMatchObject({ status: "requires_fulfillment", confirm: false, attempts: [], created: heldAt, updated: heldAt });
      const id = held.payout_id as string;

      await service.jobs.runDue();
      expect(await api.retrieve(id)).toEqual(held);

      const fulfilledAt = clock.tick();
      const fulfilled = await api.fulfill(id);
      expect(fulfilled).toEqual({ ...held, status: "pending", updated: fulfilledAt });
      const done = await settled(api, id);
      expect(done).toEqual({ ...fulfilled, status: "success", attempts: [attempt("sandbox_ach", "success")] });
    });

    it("cancel from requires_fulfillment → cancelled; it is never sent and stays cancelled", async () => {
      const { merchant, api } = await merchantApi();
      const held = await api.create(cardPayout(merchant, cards.succeeds, { confirm: false }));
      const id = held.payout_id as string;
      const cancelledAt = clock.tick();
      const cancelled = await api.cancel(id);
      expect(cancelled).toEqual({ ...held, status: "cancelled", updated: cancelledAt });

      await service.jobs.runDue();
      expect(await api.retrieve(id)).toEqual(cancelled);
      await expectError(api.cancel(id), "IR_16", "cancelled");
      await expectError(api.fulfill(id), "IR_16", "cancelled");
      expect(await api.retrieve(id)).toEqual(cancelled);
    });

    it("fulfill or cancel while pending (created confirmed, or fulfilled already) is 400 IR_16 naming pending; both are sent all the same", async () => {
      const { merchant, api } = await merchantApi();
      // The slow bank keeps a payout pending for 2 seconds after it was sent.
      const confirmed = await api.create(bankPayout(merchant, accounts.slow));
      const held = await api.create(bankPayout(merchant, accounts.slow, { confirm: false }));
      const fulfilled = await api.fulfill(held.payout_id as string);
      expect(fulfilled.status).toBe("pending");
      for (const id of [confirmed.payout_id as string, held.payout_id as string]) {
        await expectError(api.fulfill(id), "IR_16", "pending", "requires_fulfillment");
        await expectError(api.cancel(id), "IR_16", "pending", "requires_fulfillment");
      }
      expect(await settled(api, confirmed.payout_id as string, 1000)).toEqual({
        ...confirmed,
        status: "success",
        attempts: [attempt("sandbox_ach", "success")],
      });
      expect(await settled(api, held.payout_id as string, 1000)).toEqual({
        ...fulfilled,
        status: "success",
        attempts: [attempt("sandbox_ach", "success")],
      });
    });

    it.each([
      ["success", (m: TestMerchant) => cardPayout(m, cards.succeeds)],
      ["failed", (m: TestMerchant) => bankPayout(m, accounts.closed)],
    ])("a payout in %s is final: fulfill and cancel are 400 IR_16 naming the status, nothing changes", async (status, body) => {
      const { merchant, api } = await merchantApi();
      const created = await api.create(body(merchant));
      const done = await settled(api, created.payout_id as string);
      expect(done.status).toBe(status);
      clock.tick();
      await expectError(api.fulfill(created.payout_id as string), "IR_16", status);
      await expectError(api.cancel(created.payout_id as string), "IR_16", status);
      await service.jobs.runDue();
      expect(await api.retrieve(created.payout_id as string)).toEqual(done);
    });
  });

  describe("update", () => {
    it('merges metadata (a key set to "" is removed) without an event, also on a final payout', async () => {
      const { merchant, api } = await merchantApi();
      const created = await api.create(cardPayout(merchant, cards.succeeds, { metadata: { keep: "1", change: "old", drop: "x" } }));
      const id = created.payout_id as string;
      const done = await settled(api, id);
      const eventsBefore = await eventsOf(service, merchant.merchantId, id, payoutOrder);
      expect(eventsBefore.map((e) => e.type)).toEqual(["payout.pending", "payout.success"]);

      const updatedAt = clock.tick();
      const updated = await api.update(id, { metadata: { change: "new", drop: "", added: "2" } });
      expect(updated).toEqual({ ...done, metadata: { keep: "1", change: "new", added: "2" }, updated: updatedAt });
      expect(await api.retrieve(id)).toEqual(updated);

      const again = await api.update(id, { metadata: { more: "3" } });
      expect(again.metadata).toEqual({ keep: "1", change: "new", added: "2", more: "3" });
      expect(await eventsOf(service, merchant.merchantId, id, payoutOrder)).toEqual(eventsBefore);
    });

    it.each([
      ["amount", { amount: 5 }],
      ["currency", { currency: "EUR" }],
      ["payout_method_data", { payout_method_data: bankMethod(accounts.closed) }],
      ["priority", { priority: "fast" }],
      ["email", { email: "new@example.com" }],
      ["customer_id", { customer_id: "cus_other" }],
    ])("sending %s is 400 IR_06 naming it, and nothing changes", async (field, change) => {
      const { merchant, api } = await merchantApi();
      const held = await api.create(bankPayout(merchant, accounts.succeeds, { confirm: false, metadata: { k: "v" } }));
      const id = held.payout_id as string;
      clock.tick();
      await expectError(api.update(id, { ...change, metadata: { k: "changed" } }), "IR_06", field);
      expect(await api.retrieve(id)).toEqual(held);
    });

    it("an unknown payout is 404 HE_02 naming it on update, retrieve, fulfill and cancel", async () => {
      const { api } = await merchantApi();
      await expectError(api.update("po_missing", { metadata: { k: "v" } }), "HE_02", "po_missing");
      await expectError(api.retrieve("po_missing"), "HE_02", "po_missing");
      await expectError(api.fulfill("po_missing"), "HE_02", "po_missing");
      await expectError(api.cancel("po_missing"), "HE_02", "po_missing");
    });
  });

  describe("validation errors arrive as the documented error", () => {
    it("missing field → IR_04, expired card → IR_16, unknown test card → IR_05, unknown customer or profile → 404 HE_02; nothing is written", async () => {
      const { merchant, api } = await merchantApi();
      await expectError(api.create(without(cardPayout(merchant, cards.succeeds), "amount")), "IR_04", "amount");
      await expectError(
        api.create(without(bankPayout(merchant, accounts.succeeds), "payout_method_data.bank.bank_routing_number")),
        "IR_04",
        "payout_method_data.bank.bank_routing_number",
      );
      await expectError(
        api.create(
          cardPayout(merchant, cards.succeeds, { payout_method_data: cardMethod(cards.succeeds, { card_exp_year: yearFromNow(-1) }) }),
        ),
        "IR_16",
        "expired",
      );
      await expectError(
        api.create(cardPayout(merchant, cards.succeeds, { payout_method_data: cardMethod(cards.unsupported) })),
        "IR_05",
        "payout_method_data.card.card_number",
      );
      await expectError(api.create(cardPayout(merchant, cards.succeeds, { customer_id: "cus_missing" })), "HE_02", "customer_id");
      const other = await newMerchant(service.url);
      await expectError(api.create(cardPayout(merchant, cards.succeeds, { profile_id: other.profileId })), "HE_02", "profile_id");
      expect(await payoutRowsOf(merchant.merchantId)).toEqual({ payouts: 0, events: 0 });
      expect((await api.list({})).total_count).toBe(0);
    });
  });

  describe("environments and ownership", () => {
    it("a production key cannot create a payout (400 IR_16: no payout processor) and does not see sandbox payouts", async () => {
      const { merchant, api } = await merchantApi();
      const sandboxPayout = await api.create(cardPayout(merchant, cards.succeeds, { confirm: false }));
      const production = restApi(await issueKey(service.url, merchant.merchantId, "production"));
      await expectError(production.create(cardPayout(merchant, cards.succeeds)), "IR_16", "processor");
      await expectError(production.retrieve(sandboxPayout.payout_id as string), "HE_02");
      await expectError(production.fulfill(sandboxPayout.payout_id as string), "HE_02");
      await expectError(production.cancel(sandboxPayout.payout_id as string), "HE_02");
      expect(await production.list({})).toEqual({ data: [], total_count: 0, has_more: false });
      expect(await payoutRowsOf(merchant.merchantId)).toEqual({ payouts: 1, events: 1 });
      expect(await api.retrieve(sandboxPayout.payout_id as string)).toEqual(sandboxPayout);
    });

    it("another merchant can neither see nor act on a payout (404 HE_02), nor list it", async () => {
      const owner = await merchantApi();
      const held = await owner.api.create(cardPayout(owner.merchant, cards.succeeds, { confirm: false }));
      const id = held.payout_id as string;

      const stranger = await merchantApi();
      await expectError(stranger.api.retrieve(id), "HE_02");
      await expectError(stranger.api.update(id, { metadata: { k: "v" } }), "HE_02");
      await expectError(stranger.api.fulfill(id), "HE_02");
      await expectError(stranger.api.cancel(id), "HE_02");
      expect(await stranger.api.list({})).toEqual({ data: [], total_count: 0, has_more: false });
      expect(await owner.api.retrieve(id)).toEqual(held);
    });
  });

  describe("events", () => {
    it.each([
      ["card 4242424242424242", "success", (m: TestMerchant) => cardPayout(m, cards.succeeds)],
      ["bank account 000111111116", "failed", (m: TestMerchant) => bankPayout(m, accounts.closed)],
      ["card 4000000000000119, after a failover", "success", (m: TestMerchant) => cardPayout(m, cards.instantFails, { priority: "fast" })],
    ])("%s: payout.pending on create, then one payout.%s, each with the object as the API showed it then", async (_, status, body) => {
      const { merchant, api } = await merchantApi();
      const created = await api.create(body(merchant));
      const done = await settled(api, created.payout_id as string);
      expect(done.status).toBe(status);
      expect(await eventsOf(service, merchant.merchantId, created.payout_id as string, payoutOrder)).toEqual([
        { type: "payout.pending", object: created },
        { type: `payout.${status}`, object: done },
      ]);
    });

    it("payout.requires_fulfillment, payout.pending on fulfill, payout.success once sent", async () => {
      const { merchant, api } = await merchantApi();
      const held = await api.create(bankPayout(merchant, accounts.succeeds, { confirm: false }));
      const id = held.payout_id as string;
      expect(await eventsOf(service, merchant.merchantId, id, payoutOrder)).toEqual([
        { type: "payout.requires_fulfillment", object: held },
      ]);
      clock.tick();
      const fulfilled = await api.fulfill(id);
      const done = await settled(api, id);
      expect(await eventsOf(service, merchant.merchantId, id, payoutOrder)).toEqual([
        { type: "payout.requires_fulfillment", object: held },
        { type: "payout.pending", object: fulfilled },
        { type: "payout.success", object: done },
      ]);
    });

    it("payout.requires_fulfillment, then payout.cancelled; a refused cancel or fulfill writes none", async () => {
      const { merchant, api } = await merchantApi();
      const held = await api.create(cardPayout(merchant, cards.succeeds, { confirm: false }));
      const id = held.payout_id as string;
      clock.tick();
      const cancelled = await api.cancel(id);
      await expectError(api.cancel(id), "IR_16");
      await expectError(api.fulfill(id), "IR_16");
      expect(await eventsOf(service, merchant.merchantId, id, payoutOrder)).toEqual([
        { type: "payout.requires_fulfillment", object: held },
        { type: "payout.cancelled", object: cancelled },
      ]);
    });
  });
});

describe.each(["POST", "GET"] as const)("listing payouts with %s", (listWith) => {
  it("lists newest first with exact total_count and has_more across pages", async () => {
    const { merchant, api } = await merchantApi(listWith);
    const created: Json[] = [];
    for (const amount of [100, 200, 300]) {
      clock.tick();
      created.push(await api.create(cardPayout(merchant, cards.succeeds, { amount, confirm: false })));
    }
    const [p1, p2, p3] = created;

    expect(await api.list({})).toEqual({ data: [p3, p2, p1], total_count: 3, has_more: false });
    expect(await api.list({ limit: 2 })).toEqual({ data: [p3, p2], total_count: 3, has_more: true });
    expect(await api.list({ limit: 2, offset: 2 })).toEqual({ data: [p1], total_count: 3, has_more: false });
    expect(await api.list({ limit: 1, offset: 1 })).toEqual({ data: [p2], total_count: 3, has_more: true });
    expect(await api.list({ offset: 3 })).toEqual({ data: [], total_count: 3, has_more: false });
  });

  it("filters by status, customer_id, payout_type and currency (any case), alone and together", async () => {
    const { merchant, api } = await merchantApi(listWith);
    const customerId = await newCustomer(merchant.apiKey);

    clock.tick();
    const sent = await api.create(cardPayout(merchant, cards.succeeds, { customer_id: customerId }));
    await settled(api, sent.payout_id as string);
    clock.tick();
    const held = await api.create(bankPayout(merchant, accounts.succeeds, { currency: "EUR", confirm: false }));
    clock.tick();
    const failed = await api.create(bankPayout(merchant, accounts.closed, { customer_id: customerId }));
    await settled(api, failed.payout_id as string);
    clock.tick();
    const cancelled = await api.create(cardPayout(merchant, cards.succeeds, { currency: "GBP", confirm: false }));
    clock.tick();
    await api.cancel(cancelled.payout_id as string);

    // Everything as it is now, newest first.
    const [rCancelled, rFailed, rHeld, rSent] = await Promise.all(
      [cancelled, failed, held, sent].map((p) => api.retrieve(p.payout_id as string)),
    );
    expect([rCancelled, rFailed, rHeld, rSent].map((p) => p!.status)).toEqual(["cancelled", "failed", "requires_fulfillment", "success"]);

    const page = (...data: Json[]) => ({ data, total_count: data.length, has_more: false });
    expect(await api.list({})).toEqual(page(rCancelled!, rFailed!, rHeld!, rSent!));
    for (const payout of [rCancelled, rFailed, rHeld, rSent]) {
      expect(await api.list({ status: payout!.status as string })).toEqual(page(payout!));
    }
    expect(await api.list({ status: "pending" })).toEqual(page());
    expect(await api.list({ customer_id: customerId })).toEqual(page(rFailed!, rSent!));
    expect(await api.list({ customer_id: "cus_nobody" })).toEqual(page());
    expect(await api.list({ payout_type: "card" })).toEqual(page(rCancelled!, rSent!));
    expect(await api.list({ payout_type: "bank" })).toEqual(page(rFailed!, rHeld!));
    expect(await api.list({ currency: "usd" })).toEqual(page(rFailed!, rSent!));
    expect(await api.list({ currency: "EUR" })).toEqual(page(rHeld!));
    expect(await api.list({ currency: "gbp", payout_type: "card" })).toEqual(page(rCancelled!));
    expect(await api.list({ customer_id: customerId, payout_type: "bank", status: "failed" })).toEqual(page(rFailed!));
    expect(await api.list({ customer_id: customerId, status: "cancelled" })).toEqual(page());
    expect(ids(await api.list({ created_gte: rFailed!.created! }))).toEqual([rCancelled!.payout_id, rFailed!.payout_id]);
    expect(await api.list({ payout_type: "bank", limit: 1 })).toEqual({ data: [rFailed], total_count: 2, has_more: true });
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

describe("payout validation over REST", () => {
  /** A request the service must refuse: how to build it, and the error that names the field. */
  type Refusal = [
    label: string,
    body: (m: TestMerchant) => Json | Promise<Json>,
    status: number,
    code: "IR_04" | "IR_05" | "IR_16" | "HE_02",
    mention: string,
  ];

  const refusals: Refusal[] = [
    ["amount missing", (m) => without(cardPayout(m, cards.succeeds), "amount"), 400, "IR_04", "amount"],
    ["currency missing", (m) => without(cardPayout(m, cards.succeeds), "currency"), 400, "IR_04", "currency"],
    ["profile_id missing", (m) => without(cardPayout(m, cards.succeeds), "profile_id"), 400, "IR_04", "profile_id"],
    ["payout_type missing", (m) => without(cardPayout(m, cards.succeeds), "payout_type"), 400, "IR_04", "payout_type"],
    ["payout_method_data missing", (m) => without(cardPayout(m, cards.succeeds), "payout_method_data"), 400, "IR_04", "payout_method_data"],
    [
      "payout_method_data without the card",
      (m) => cardPayout(m, cards.succeeds, { payout_method_data: {} }),
      400,
      "IR_04",
      "payout_method_data.card",
    ],
    ["amount 0", (m) => cardPayout(m, cards.succeeds, { amount: 0 }), 400, "IR_05", "amount"],
    ["a fractional amount", (m) => cardPayout(m, cards.succeeds, { amount: 10.5 }), 400, "IR_05", "amount"],
    ["an amount as a string", (m) => cardPayout(m, cards.succeeds, { amount: "1000" }), 400, "IR_05", "amount"],
    ["an unknown currency", (m) => cardPayout(m, cards.succeeds, { currency: "XYZ" }), 400, "IR_05", "currency"],
    ["an unknown payout_type", (m) => cardPayout(m, cards.succeeds, { payout_type: "cash" }), 400, "IR_05", "payout_type"],
    ["payout_type wallet", (m) => cardPayout(m, cards.succeeds, { payout_type: "wallet" }), 400, "IR_05", "payout_type"],
    ["an unknown priority", (m) => cardPayout(m, cards.succeeds, { priority: "overnight" }), 400, "IR_05", "priority"],
    [
      "a card number failing the Luhn check",
      (m) => cardPayout(m, cards.succeeds, { payout_method_data: cardMethod("4242424242424241") }),
      400,
      "IR_05",
      "payout_method_data.card.card_number",
    ],
    [
      "a Luhn-valid card that is not a sandbox test card",
      (m) => cardPayout(m, cards.succeeds, { payout_method_data: cardMethod(cards.unsupported) }),
      400,
      "IR_05",
      "payout_method_data.card.card_number",
    ],
    [
      "expiry month 13",
      (m) => cardPayout(m, cards.succeeds, { payout_method_data: cardMethod(cards.succeeds, { card_exp_month: "13" }) }),
      400,
      "IR_05",
      "payout_method_data.card.card_exp_month",
    ],
    [
      "an expired card",
      (m) => cardPayout(m, cards.succeeds, { payout_method_data: cardMethod(cards.succeeds, { card_exp_year: yearFromNow(-1) }) }),
      400,
      "IR_16",
      "expired",
    ],
    [
      "the card number missing",
      (m) => without(cardPayout(m, cards.succeeds), "payout_method_data.card.card_number"),
      400,
      "IR_04",
      "payout_method_data.card.card_number",
    ],
    ...(["bank_account_number", "bank_routing_number", "bank_account_holder_name"] as const).map(
      (field): Refusal => [
        `the bank's ${field} missing`,
        (m) => without(bankPayout(m, accounts.succeeds), `payout_method_data.bank.${field}`),
        400,
        "IR_04",
        `payout_method_data.bank.${field}`,
      ],
    ),
    [
      "a bank account number with symbols",
      (m) => bankPayout(m, accounts.succeeds, { payout_method_data: bankMethod("0001-2345/6789") }),
      400,
      "IR_05",
      "payout_method_data.bank.bank_account_number",
    ],
    [
      "payout_type card with a bank key",
      (m) => cardPayout(m, cards.succeeds, { payout_method_data: { ...cardMethod(cards.succeeds), ...bankMethod(accounts.succeeds) } }),
      400,
      "IR_05",
      "payout_method_data.bank",
    ],
    [
      "payout_type bank with only a card",
      (m) => bankPayout(m, accounts.succeeds, { payout_method_data: cardMethod(cards.succeeds) }),
      400,
      "IR_05",
      "payout_method_data.card",
    ],
    [
      "an invalid billing country",
      (m) => cardPayout(m, cards.succeeds, { billing: { address: { line1: "1 Main St", country: "USA" } } }),
      400,
      "IR_05",
      "billing.address.country",
    ],
    ["an invalid email", (m) => cardPayout(m, cards.succeeds, { email: "not-an-email" }), 400, "IR_05", "email"],
    ["an invalid phone", (m) => cardPayout(m, cards.succeeds, { phone: "call me" }), 400, "IR_05", "phone"],
    ["a non-string metadata value", (m) => cardPayout(m, cards.succeeds, { metadata: { order_no: 1 } }), 400, "IR_05", "order_no"],
    ["an unknown customer_id", (m) => cardPayout(m, cards.succeeds, { customer_id: "cus_missing" }), 404, "HE_02", "customer_id"],
    [
      "another merchant's customer",
      async (m) => cardPayout(m, cards.succeeds, { customer_id: await newCustomer((await newMerchant(service.url)).apiKey) }),
      404,
      "HE_02",
      "customer_id",
    ],
    [
      "a deleted customer",
      async (m) => {
        const customerId = await newCustomer(m.apiKey);
        const deleted = await rest(service.url, "DELETE", `/customers/${customerId}`, { apiKey: m.apiKey });
        expect(deleted.status).toBe(200);
        return cardPayout(m, cards.succeeds, { customer_id: customerId });
      },
      404,
      "HE_02",
      "customer_id",
    ],
    [
      "a customer of the merchant's production partition",
      async (m) =>
        cardPayout(m, cards.succeeds, { customer_id: await newCustomer(await issueKey(service.url, m.merchantId, "production")) }),
      404,
      "HE_02",
      "customer_id",
    ],
    [
      "another merchant's profile",
      async (m) => cardPayout(m, cards.succeeds, { profile_id: (await newMerchant(service.url)).profileId }),
      404,
      "HE_02",
      "profile_id",
    ],
  ];

  const cases = refusals.map(([label, body, status, code, mention]) => ({ label, body, status, code, mention }));

  it.each(cases)("refuses $label with $code, and writes nothing", async ({ body, status, code, mention }) => {
    const merchant = await newMerchant(service.url);
    const api = restApi(merchant.apiKey);
    const existing = await api.create(bankPayout(merchant, accounts.succeeds, { confirm: false }));
    const res = await rest(service.url, "POST", "/payouts/create", { apiKey: merchant.apiKey, body: await body(merchant) });
    expect(expectRestError(res, status, code)).toContain(mention);
    expect(await api.list({})).toEqual({ data: [existing], total_count: 1, has_more: false });
    expect(await payoutRowsOf(merchant.merchantId)).toEqual({ payouts: 1, events: 1 });
  });

  it("an update with a field the API does not know is 400 IR_06 naming it", async () => {
    const merchant = await newMerchant(service.url);
    const held = await restApi(merchant.apiKey).create(cardPayout(merchant, cards.succeeds, { confirm: false }));
    const res = await rest(service.url, "POST", `/payouts/${held.payout_id}`, { apiKey: merchant.apiKey, body: { colour: "red" } });
    expect(expectRestError(res, 400, "IR_06")).toContain("colour");
  });

  it.each(["name", "phone", "billing", "confirm", "processor", "profile_id", "payout_type"])(
    "an update sending %s is 400 IR_06 naming it",
    async (field) => {
      const merchant = await newMerchant(service.url);
      const api = restApi(merchant.apiKey);
      const held = await api.create(cardPayout(merchant, cards.succeeds, { confirm: false }));
      const values: Record<string, unknown> = {
        name: "Someone Else",
        phone: "020 7946 0001",
        billing: { address: { country: "FR" } },
        confirm: true,
        processor: "sandbox_card",
        profile_id: merchant.profileId,
        payout_type: "bank",
      };
      const res = await rest(service.url, "POST", `/payouts/${held.payout_id}`, {
        apiKey: merchant.apiKey,
        body: { [field]: values[field], metadata: { k: "v" } },
      });
      expect(expectRestError(res, 400, "IR_06")).toContain(field);
      expect(await api.retrieve(held.payout_id as string)).toEqual(held);
    },
  );
});

describe("card and account numbers over REST", () => {
  it("no response, event or stored column shows a full card or account number; responses carry last4", async () => {
    const merchant = await newMerchant(service.url);
    const api = restApi(merchant.apiKey);
    const seen: Json[] = [];
    const payoutIds: string[] = [];
    for (const [body, number] of [
      [cardPayout(merchant, cards.succeeds), cards.succeeds],
      [cardPayout(merchant, cards.declined), cards.declined],
      [bankPayout(merchant, accounts.succeeds), accounts.succeeds],
      [bankPayout(merchant, accounts.closed, { confirm: false }), accounts.closed],
    ] as const) {
      const created = await api.create(body);
      seen.push(created);
      payoutIds.push(created.payout_id as string);
      const masked = created.payout_method_data as { card: Json | null; bank: Json | null };
      expect((masked.card ?? masked.bank)!.last4).toBe(number.slice(-4));
    }
    for (const id of payoutIds.slice(0, 3)) seen.push(await settled(api, id));
    seen.push(await api.fulfill(payoutIds[3]!), await settled(api, payoutIds[3]!));
    seen.push(await api.update(payoutIds[0]!, { metadata: { note: "paid" } }));
    seen.push(await api.list({}), await restApi(merchant.apiKey, "GET").list({}));

    const events: Array<{ data: unknown }> = await service.app.dataSource.query("SELECT data FROM events WHERE merchant_id = $1", [
      merchant.merchantId,
    ]);
    const rows = await Promise.all(payoutIds.map((id) => storedPayout(merchant.merchantId, id)));
    const everything = JSON.stringify([seen, events.map((e) => e.data), rows.map((r) => r.row)]);
    for (const number of [cards.succeeds, cards.declined, accounts.succeeds, accounts.closed]) {
      expect(everything).not.toContain(number);
    }
    expect(events.length).toBe(9);
  });
});

describe("destination encryption", () => {
  it("a held payout keeps its card only encrypted; cancelling drops the ciphertext", async () => {
    const merchant = await newMerchant(service.url);
    const api = restApi(merchant.apiKey);
    const held = await api.create(cardPayout(merchant, cards.succeeds, { confirm: false }));
    const id = held.payout_id as string;

    const stored = await storedPayout(merchant.merchantId, id);
    expect(stored.status).toBe("requires_fulfillment");
    expect(stored.ciphertext).toEqual(expect.stringMatching(/\S{20,}/));
    expect(stored.ciphertext).not.toContain(cards.succeeds);
    expect(stored.row).not.toContain(cards.succeeds);

    await api.cancel(id);
    expect(await storedPayout(merchant.merchantId, id)).toMatchObject({ status: "cancelled", ciphertext: null });
  });

  it("a pending payout keeps its account encrypted while the bank has not answered; success drops it", async () => {
    const merchant = await newMerchant(service.url);
    const api = restApi(merchant.apiKey);
    const held = await api.create(bankPayout(merchant, accounts.slow, { confirm: false }));
    const id = held.payout_id as string;
    const heldRow = await storedPayout(merchant.merchantId, id);
    expect(heldRow.ciphertext).not.toBeNull();
    expect(heldRow.ciphertext).not.toContain(accounts.slow);

    await api.fulfill(id);
    // The attempt is committed before the (slow) bank is called, and the payout stays pending until it answers.
    const sending = await waitUntil(
      () => api.retrieve(id),
      (payout) => (payout.attempts as Json[]).length === 1,
    );
    expect(sending).toMatchObject({ status: "pending", attempts: [attempt("sandbox_ach", "pending")] });
    const pendingRow = await storedPayout(merchant.merchantId, id);
    expect(pendingRow.status).toBe("pending");
    expect(pendingRow.ciphertext).toBe(heldRow.ciphertext);
    expect(pendingRow.row).not.toContain(accounts.slow);

    expect((await settled(api, id, 1000)).status).toBe("success");
    expect(await storedPayout(merchant.merchantId, id)).toMatchObject({ status: "success", ciphertext: null });
  });

  it("a failed payout keeps no ciphertext", async () => {
    const merchant = await newMerchant(service.url);
    const api = restApi(merchant.apiKey);
    const created = await api.create(cardPayout(merchant, cards.declined));
    expect((await settled(api, created.payout_id as string)).status).toBe("failed");
    expect(await storedPayout(merchant.merchantId, created.payout_id as string)).toMatchObject({ status: "failed", ciphertext: null });
  });
});

describe("payouts over REST only", () => {
  it("retrieves with GET /payouts/:payout_id what create answered", async () => {
    const merchant = await newMerchant(service.url);
    const created = await rest(service.url, "POST", "/payouts/create", {
      apiKey: merchant.apiKey,
      body: cardPayout(merchant, cards.succeeds, { confirm: false }),
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const got = await rest(service.url, "GET", `/payouts/${created.body.payout_id}`, { apiKey: merchant.apiKey });
    expect(got.status).toBe(200);
    expect(got.body).toEqual(created.body);
  });

  it("lists the same page via GET query parameters and via POST body", async () => {
    const merchant = await newMerchant(service.url);
    const api = restApi(merchant.apiKey);
    const created: Json[] = [];
    for (const currency of ["USD", "EUR", "USD", "USD"]) {
      clock.tick();
      created.push(await api.create(bankPayout(merchant, accounts.succeeds, { currency, confirm: false })));
    }
    const params = { limit: 1, offset: 1, status: "requires_fulfillment", payout_type: "bank", currency: "usd" };
    const viaGet = await rest(service.url, "GET", `/payouts/list${query(params)}`, { apiKey: merchant.apiKey });
    const viaPost = await rest(service.url, "POST", "/payouts/list", { apiKey: merchant.apiKey, body: params });
    expect(viaGet.status).toBe(200);
    expect(viaGet.body).toEqual(viaPost.body);
    expect(viaGet.body).toEqual({ data: [created[2]], total_count: 3, has_more: true });
  });

  it("refuses an unknown status filter with 400 IR_05 naming status", async () => {
    const merchant = await newMerchant(service.url);
    const res = await rest(service.url, "GET", "/payouts/list?status=done", { apiKey: merchant.apiKey });
    expect(expectRestError(res, 400, "IR_05")).toContain("status");
  });
});
