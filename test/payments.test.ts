import { describe, expect, it } from "vitest";
import { cardData } from "./support/cards.js";
import { rest } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { expectRestError } from "./support/errors.js";
import { eventsOf } from "./support/events.js";
import { issueKey, newMerchant, type TestMerchant } from "./support/merchant.js";
import { expectError, type Json, query, restCaller, RestFailure, restList, uniqueId } from "./support/resource-api.js";
import { runningService } from "./support/running.js";
import { noPolling } from "./support/service.js";

/*
 * Payments (interface §2–§4, decisions §2–§5, §7, §8), each scenario once, over REST: it talks to a
 * small PaymentApi that sends the documented JSON. That every RPC carries the same request and answer
 * over Connect, gRPC and gRPC-Web is the protocol-parity suite's subject (test/parity).
 *
 * Time never passes by itself: the service runs on a TestClock, the background job poll is pushed
 * out of reach, and time-based moves happen only when a test advances the clock and calls runDue().
 */

const clock = new TestClock();
const service = runningService(noPolling, clock);

const hour = 3_600_000;
const day = 24 * hour;

/** The payment operations, as seen by a caller; results use the REST field names. */
interface PaymentApi {
  create(body: Json): Promise<Json>;
  update(paymentId: string, body: Json): Promise<Json>;
  retrieve(paymentId: string, clientSecret?: string): Promise<Json>;
  confirm(paymentId: string, body: Json): Promise<Json>;
  capture(paymentId: string, body?: Json): Promise<Json>;
  cancel(paymentId: string, body?: Json): Promise<Json>;
  list(params: Json): Promise<Json>;
}

function restApi(apiKey: string, listWith: "GET" | "POST" = "POST"): PaymentApi {
  const call = restCaller(service.url, apiKey);
  const at = (id: string) => `/payments/${encodeURIComponent(id)}`;
  return {
    create: (body) => call("POST", "/payments", body),
    update: (id, body) => call("POST", at(id), body),
    retrieve: (id, clientSecret) => call("GET", at(id) + query(clientSecret === undefined ? {} : { client_secret: clientSecret })),
    confirm: (id, body) => call("POST", `${at(id)}/confirm`, body),
    capture: (id, body = {}) => call("POST", `${at(id)}/capture`, body),
    cancel: (id, body = {}) => call("POST", `${at(id)}/cancel`, body),
    list: restList(call, listWith, "/payments/list"),
  };
}

/** A fresh merchant (sandbox secret key) and its PaymentApi, so each scenario works in a merchant of its own. */
async function merchantApi(listWith: "GET" | "POST" = "POST"): Promise<{ merchant: TestMerchant; api: PaymentApi }> {
  const merchant = await newMerchant(service.url);
  return { merchant, api: restApi(merchant.apiKey, listWith) };
}

/** Card fields for a payment request, expiring after the service's clock. */
const card = (number: string, overrides: Record<string, string | undefined> = {}): Json => cardData(number, clock.now(), overrides);

const visa = "4242424242424242";
const insufficientFunds = "4000000000009995";
const declined = "4000000000000002";

const ids = (list: Json) => (list.data as Json[]).map((p) => p.payment_id);

/** Every event and payment row of a merchant, to show that a refused request left nothing behind. */
async function rowsOfMerchant(merchantId: string): Promise<{ events: number; payments: number }> {
  const [events] = await service.app.dataSource.query("SELECT count(*) AS n FROM events WHERE merchant_id = $1", [merchantId]);
  const [payments] = await service.app.dataSource.query("SELECT count(*) AS n FROM payments WHERE merchant_id = $1", [merchantId]);
  return { events: Number(events.n), payments: Number(payments.n) };
}

describe("payments", () => {
  describe("create", () => {
    it("without confirm: requires_payment_method with a client_secret, the full object with unset fields null", async () => {
      const { merchant, api } = await merchantApi();
      const now = clock.tick();
      const payment = await api.create({
        amount: 1099,
        currency: "USD",
        profile_id: merchant.profileId,
        description: "Order 42",
        metadata: { order: "42" },
      });
      expect(payment).toEqual({
        payment_id: expect.stringMatching(/^pay_[0-9A-Za-z]+$/),
        merchant_id: merchant.merchantId,
        profile_id: merchant.profileId,
        status: "requires_payment_method",
        amount: 1099,
        amount_received: null,
        amount_capturable: 0,
        currency: "USD",
        capture_method: "automatic",
        capture_on: null,
        payment_method: null,
        payment_method_type: null,
        payment_method_data: null,
        payment_method_id: null,
        customer_id: null,
        email: null,
        description: "Order 42",
        statement_descriptor: null,
        client_secret: expect.stringMatching(/^.{20,}$/),
        return_url: null,
        next_action: null,
        error_code: null,
        error_message: null,
        cancellation_reason: null,
        metadata: { order: "42" },
        created: now,
        modified_at: now,
        setup_future_usage: null,
        off_session: false,
        mandate_id: null,
      });
      expect(payment.client_secret).toContain(payment.payment_id as string);
      expect(await api.retrieve(payment.payment_id as string)).toEqual(payment);
    });

    it("stores every optional field it is given", async () => {
      const { merchant, api } = await merchantApi();
      const customer = await rest(service.url, "POST", "/customers", { apiKey: merchant.apiKey, body: { name: "Jane" } });
      expect(customer.status).toBe(200);
      const payment = await api.create({
        amount: 500,
        currency: "eur",
        profile_id: merchant.profileId,
        customer_id: customer.body.customer_id,
        email: "jane@example.com",
        statement_descriptor: "SHOP 42",
        return_url: "https://shop.example.com/done",
        payment_method_type: "credit",
        capture_method: "manual",
      });
      expect(payment).toMatchObject({
        status: "requires_payment_method",
        currency: "EUR",
        customer_id: customer.body.customer_id,
        email: "jane@example.com",
        statement_descriptor: "SHOP 42",
        return_url: "https://shop.example.com/done",
        payment_method_type: "credit",
        capture_method: "manual",
      });
      expect(await api.retrieve(payment.payment_id as string)).toEqual(payment);
    });

    it("with confirm true and 4242…: succeeded, amount_received = amount, the card masked", async () => {
      const { merchant, api } = await merchantApi();
      const year = String(clock.now().getUTCFullYear() + 3);
      const payment = await api.create({
        amount: 2500,
        currency: "USD",
        profile_id: merchant.profileId,
        confirm: true,
        payment_method: "card",
        payment_method_data: card(visa, { card_exp_month: "03", card_exp_year: year, card_holder_name: "Jane Doe" }),
      });
      expect(payment).toMatchObject({
        status: "succeeded",
        amount: 2500,
        amount_received: 2500,
        amount_capturable: 0,
        payment_method: "card",
        payment_method_data: { card: { last4: "4242", brand: "visa", exp_month: "03", exp_year: year } },
        client_secret: expect.any(String),
        error_code: null,
        error_message: null,
        next_action: null,
      });
      // Never the full number or the CVC (decisions §4).
      expect(JSON.stringify(payment)).not.toContain(visa);
      expect(await api.retrieve(payment.payment_id as string)).toEqual(payment);
    });

    it.each([
      ["Visa", "4242424242424242", "visa", "4242"],
      ["Visa", "4111111111111111", "visa", "1111"],
      ["Mastercard", "5555555555554444", "mastercard", "4444"],
      ["Amex (4-digit CVC)", "378282246310005", "amex", "0005"],
      ["Discover", "6011111111111117", "discover", "1117"],
    ])("the %s test card %s succeeds", async (_, number, brand, last4) => {
      const { merchant, api } = await merchantApi();
      const payment = await api.create({
        amount: 100,
        currency: "USD",
        profile_id: merchant.profileId,
        confirm: true,
        payment_method_data: card(number),
      });
      expect(payment).toMatchObject({ status: "succeeded", amount_received: 100, payment_method_data: { card: { last4, brand } } });
    });

    it.each([
      [insufficientFunds, "insufficient_funds"],
      [declined, "card_declined"],
    ])("the test card %s fails with error_code %s: an answer, not an HTTP error", async (number, errorCode) => {
      const { merchant, api } = await merchantApi();
      const payment = await api.create({
        amount: 100,
        currency: "USD",
        profile_id: merchant.profileId,
        confirm: true,
        payment_method_data: card(number),
      });
      expect(payment).toMatchObject({
        status: "failed",
        amount_received: null,
        amount_capturable: 0,
        error_code: errorCode,
        error_message: expect.stringMatching(/\S/),
        payment_method_data: { card: { last4: number.slice(-4) } },
      });
      expect(await api.retrieve(payment.payment_id as string)).toEqual(payment);
    });

    it("refuses a Luhn-valid card the sandbox does not know: 400 IR_05 naming the card number", async () => {
      const { merchant, api } = await merchantApi();
      const message = await expectError(
        api.create({
          amount: 100,
          currency: "USD",
          profile_id: merchant.profileId,
          confirm: true,
          payment_method_data: card("4012888888881881"),
        }),
        "IR_05",
        "payment_method_data.card.card_number",
      );
      expect(message).toContain("test card");
      expect(message).not.toContain("4012888888881881");
      expect((await api.list({})).total_count).toBe(0);
    });

    it.each([
      ["a bad check digit", { card_number: "4242424242424241" }, "IR_05", "payment_method_data.card.card_number"],
      ["letters in the number", { card_number: "4242abcd42424242" }, "IR_05", "payment_method_data.card.card_number"],
      ["an Amex with a 3-digit CVC", { card_number: "378282246310005", card_cvc: "123" }, "IR_05", "payment_method_data.card.card_cvc"],
      ["a Visa with a 4-digit CVC", { card_cvc: "1234" }, "IR_05", "payment_method_data.card.card_cvc"],
      ["month 13", { card_exp_month: "13" }, "IR_05", "payment_method_data.card.card_exp_month"],
      ["no card_number", { card_number: undefined }, "IR_04", "payment_method_data.card.card_number"],
      ["no card_exp_month", { card_exp_month: undefined }, "IR_04", "payment_method_data.card.card_exp_month"],
      ["no card_exp_year", { card_exp_year: undefined }, "IR_04", "payment_method_data.card.card_exp_year"],
      ["no card_cvc", { card_cvc: undefined }, "IR_04", "payment_method_data.card.card_cvc"],
    ] as const)("refuses a card with %s (%s)", async (_, overrides, code, field) => {
      const { merchant, api } = await merchantApi();
      await expectError(
        api.create({
          amount: 100,
          currency: "USD",
          profile_id: merchant.profileId,
          confirm: true,
          payment_method_data: card(visa, overrides),
        }),
        code,
        field,
      );
      expect((await api.list({})).total_count).toBe(0);
    });

    it("refuses an expired card with 400 IR_16", async () => {
      const { merchant, api } = await merchantApi();
      const lastYear = String(clock.now().getUTCFullYear() - 1);
      const message = await expectError(
        api.create({
          amount: 100,
          currency: "USD",
          profile_id: merchant.profileId,
          confirm: true,
          payment_method_data: card(visa, { card_exp_month: "12", card_exp_year: lastYear }),
        }),
        "IR_16",
      );
      expect(message).toMatch(/expired/i);
      expect((await api.list({})).total_count).toBe(0);
    });

    it("refuses confirm true without card data with 400 IR_04 naming the card", async () => {
      const { merchant, api } = await merchantApi();
      await expectError(
        api.create({ amount: 100, currency: "USD", profile_id: merchant.profileId, confirm: true }),
        "IR_04",
        "payment_method_data.card",
      );
    });

    it("refuses card data without confirm with 400 IR_05: card details are never stored", async () => {
      const { merchant, api } = await merchantApi();
      await expectError(
        api.create({ amount: 100, currency: "USD", profile_id: merchant.profileId, payment_method_data: card(visa) }),
        "IR_05",
        "payment_method_data",
      );
      await expectError(
        api.create({ amount: 100, currency: "USD", profile_id: merchant.profileId, confirm: false, payment_method_data: card(visa) }),
        "IR_05",
        "payment_method_data",
      );
      expect((await api.list({})).total_count).toBe(0);
    });
  });

  describe("amount, currency and references", () => {
    it.each([0, -1, 1_000_000_000_000])("refuses amount %d with 400 IR_05 naming amount", async (amount) => {
      const { merchant, api } = await merchantApi();
      await expectError(api.create({ amount, currency: "USD", profile_id: merchant.profileId }), "IR_05", "amount");
      expect((await api.list({})).total_count).toBe(0);
    });

    it("accepts the bounds 1 and 999999999999", async () => {
      const { merchant, api } = await merchantApi();
      expect((await api.create({ amount: 1, currency: "USD", profile_id: merchant.profileId })).amount).toBe(1);
      expect((await api.create({ amount: 999_999_999_999, currency: "USD", profile_id: merchant.profileId })).amount).toBe(999_999_999_999);
    });

    it.each([
      ["amount", { currency: "USD" }],
      ["currency", { amount: 100 }],
      ["profile_id", { amount: 100, currency: "USD", profile_id: undefined }],
    ])("refuses a create without %s with 400 IR_04 naming it", async (field, body) => {
      const { merchant, api } = await merchantApi();
      const sent = Object.fromEntries(
        Object.entries({ profile_id: merchant.profileId, ...body }).filter(([, v]) => v !== undefined),
      ) as Json;
      await expectError(api.create(sent), "IR_04", field);
    });

    it("accepts a lower-case currency and answers it upper-case", async () => {
      const { merchant, api } = await merchantApi();
      const payment = await api.create({ amount: 100, currency: "usd", profile_id: merchant.profileId });
      expect(payment.currency).toBe("USD");
      expect((await api.retrieve(payment.payment_id as string)).currency).toBe("USD");
    });

    it.each(["XXX", "US", "usdx", "12$"])("refuses currency %s with 400 IR_05 naming currency", async (code) => {
      const { merchant, api } = await merchantApi();
      await expectError(api.create({ amount: 100, currency: code, profile_id: merchant.profileId }), "IR_05", "currency");
    });

    it("refuses another merchant's profile_id or customer_id with 404 HE_02 naming the field", async () => {
      const { merchant, api } = await merchantApi();
      const other = await newMerchant(service.url);
      const theirCustomer = await rest(service.url, "POST", "/customers", { apiKey: other.apiKey, body: {} });
      expect(theirCustomer.status).toBe(200);

      await expectError(api.create({ amount: 100, currency: "USD", profile_id: other.profileId }), "HE_02", "profile_id");
      await expectError(
        api.create({ amount: 100, currency: "USD", profile_id: merchant.profileId, customer_id: theirCustomer.body.customer_id }),
        "HE_02",
        "customer_id",
      );
      await expectError(
        api.create({ amount: 100, currency: "USD", profile_id: merchant.profileId, customer_id: "cus_nobody" }),
        "HE_02",
        "customer_id",
      );
      expect(await rowsOfMerchant(merchant.merchantId)).toEqual({ events: 0, payments: 0 });
    });

    it("accepts a caller-chosen payment_id; a duplicate is 409 HE_01 and leaves the first untouched", async () => {
      const { merchant, api } = await merchantApi();
      const id = uniqueId("order");
      const first = await api.create({ payment_id: id, amount: 100, currency: "USD", profile_id: merchant.profileId });
      expect(first.payment_id).toBe(id);
      await expectError(api.create({ payment_id: id, amount: 999, currency: "EUR", profile_id: merchant.profileId }), "HE_01", id);
      await expectError(
        api.create({
          payment_id: id,
          amount: 999,
          currency: "USD",
          profile_id: merchant.profileId,
          confirm: true,
          payment_method_data: card(visa),
        }),
        "HE_01",
        id,
      );
      expect(await api.retrieve(id)).toEqual(first);
      expect((await api.list({})).total_count).toBe(1);

      // Ids are per merchant: another merchant may choose the same one.
      const other = await merchantApi();
      expect(
        (await other.api.create({ payment_id: id, amount: 1, currency: "USD", profile_id: other.merchant.profileId })).payment_id,
      ).toBe(id);
    });

    it('refuses a payment_id that is not URL-safe, or the reserved "list", with 400 IR_05', async () => {
      const { merchant, api } = await merchantApi();
      await expectError(
        api.create({ payment_id: "has space", amount: 1, currency: "USD", profile_id: merchant.profileId }),
        "IR_05",
        "payment_id",
      );
      await expectError(
        api.create({ payment_id: "list", amount: 1, currency: "USD", profile_id: merchant.profileId }),
        "IR_05",
        "payment_id",
      );
    });

    it("answers 404 HE_02 for an unknown payment on every operation", async () => {
      const { api } = await merchantApi();
      await expectError(api.retrieve("pay_missing"), "HE_02", "pay_missing");
      await expectError(api.update("pay_missing", { description: "x" }), "HE_02", "pay_missing");
      await expectError(api.confirm("pay_missing", { payment_method_data: card(visa) }), "HE_02", "pay_missing");
      await expectError(api.capture("pay_missing"), "HE_02", "pay_missing");
      await expectError(api.cancel("pay_missing"), "HE_02", "pay_missing");
    });

    it("another merchant can neither see nor act on a payment (404 HE_02)", async () => {
      const owner = await merchantApi();
      const payment = await owner.api.create({ amount: 100, currency: "USD", profile_id: owner.merchant.profileId });
      const id = payment.payment_id as string;
      const stranger = await merchantApi();
      await expectError(stranger.api.retrieve(id), "HE_02");
      await expectError(stranger.api.update(id, { amount: 1 }), "HE_02");
      await expectError(stranger.api.confirm(id, { payment_method_data: card(visa) }), "HE_02");
      await expectError(stranger.api.cancel(id), "HE_02");
      expect(await owner.api.retrieve(id)).toEqual(payment);
    });
  });

  describe("update and confirm", () => {
    it("update (amount → requires_confirmation, metadata merge, description), then confirm → succeeded", async () => {
      const { merchant, api } = await merchantApi();
      const created = await api.create({
        amount: 1000,
        currency: "USD",
        profile_id: merchant.profileId,
        description: "first",
        metadata: { keep: "1", change: "old", drop: "x" },
      });
      const id = created.payment_id as string;

      const updatedAt = clock.tick();
      const updated = await api.update(id, { amount: 1500, description: "second", metadata: { change: "new", drop: "", added: "2" } });
      expect(updated).toEqual({
        ...created,
        status: "requires_confirmation",
        amount: 1500,
        description: "second",
        metadata: { keep: "1", change: "new", added: "2" },
        modified_at: updatedAt,
      });
      expect(await api.retrieve(id)).toEqual(updated);

      // Fields not sent stay unchanged; a second update keeps the status.
      const again = await api.update(id, { currency: "eur" });
      expect(again).toMatchObject({ status: "requires_confirmation", amount: 1500, currency: "EUR", description: "second" });

      const confirmedAt = clock.tick();
      const confirmed = await api.confirm(id, { payment_method_data: card(visa) });
      expect(confirmed).toMatchObject({
        status: "succeeded",
        amount: 1500,
        amount_received: 1500,
        currency: "EUR",
        payment_method: "card",
        payment_method_data: { card: { last4: "4242", brand: "visa" } },
        client_secret: created.client_secret,
        created: created.created,
        modified_at: confirmedAt,
      });
      expect(await api.retrieve(id)).toEqual(confirmed);
    });

    it("an update without amount keeps requires_payment_method", async () => {
      const { merchant, api } = await merchantApi();
      const created = await api.create({ amount: 1000, currency: "USD", profile_id: merchant.profileId });
      const updated = await api.update(created.payment_id as string, { description: "note" });
      expect(updated).toMatchObject({ status: "requires_payment_method", description: "note", amount: 1000 });
    });

    it("a refused update changes nothing", async () => {
      const { merchant, api } = await merchantApi();
      const created = await api.create({ amount: 1000, currency: "USD", profile_id: merchant.profileId, description: "kept" });
      const id = created.payment_id as string;
      await expectError(api.update(id, { amount: 0, description: "lost" }), "IR_05", "amount");
      await expectError(api.update(id, { currency: "XXX", description: "lost" }), "IR_05", "currency");
      expect(await api.retrieve(id)).toEqual(created);
    });

    it("update after confirmation is 400 IR_16 naming the current and expected statuses", async () => {
      const { merchant, api } = await merchantApi();
      const created = await api.create({ amount: 1000, currency: "USD", profile_id: merchant.profileId });
      const id = created.payment_id as string;
      const confirmed = await api.confirm(id, { payment_method_data: card(visa) });
      await expectError(api.update(id, { amount: 5 }), "IR_16", "succeeded", "requires_payment_method", "requires_confirmation");
      expect(await api.retrieve(id)).toEqual(confirmed);
    });

    it("confirming twice is 400 IR_16", async () => {
      const { merchant, api } = await merchantApi();
      const id = (await api.create({ amount: 1000, currency: "USD", profile_id: merchant.profileId })).payment_id as string;
      const confirmed = await api.confirm(id, { payment_method_data: card(visa) });
      expect(confirmed.status).toBe("succeeded");
      await expectError(api.confirm(id, { payment_method_data: card(visa) }), "IR_16", "succeeded");
      expect(await api.retrieve(id)).toEqual(confirmed);
    });

    it("confirm with a declining card → failed with the error; a retry is refused", async () => {
      const { merchant, api } = await merchantApi();
      const id = (await api.create({ amount: 1000, currency: "USD", profile_id: merchant.profileId })).payment_id as string;
      const failed = await api.confirm(id, { payment_method_data: card(insufficientFunds) });
      expect(failed).toMatchObject({
        status: "failed",
        error_code: "insufficient_funds",
        error_message: expect.any(String),
        amount_received: null,
      });
      await expectError(api.confirm(id, { payment_method_data: card(visa) }), "IR_16", "failed");
      expect(await api.retrieve(id)).toEqual(failed);
    });

    it("confirm without card data is 400 IR_04 and changes nothing", async () => {
      const { merchant, api } = await merchantApi();
      const created = await api.create({ amount: 1000, currency: "USD", profile_id: merchant.profileId });
      await expectError(api.confirm(created.payment_id as string, {}), "IR_04", "payment_method_data.card");
      expect(await api.retrieve(created.payment_id as string)).toEqual(created);
    });
  });

  describe("manual capture and cancel", () => {
    async function authorized(api: PaymentApi, merchant: TestMerchant, amount = 1000): Promise<Json> {
      const created = await api.create({ amount, currency: "USD", profile_id: merchant.profileId, capture_method: "manual" });
      return api.confirm(created.payment_id as string, { payment_method_data: card(visa) });
    }

    it("confirm → requires_capture with amount_capturable = amount; a full capture → succeeded", async () => {
      const { merchant, api } = await merchantApi();
      const payment = await authorized(api, merchant, 1000);
      expect(payment).toMatchObject({
        status: "requires_capture",
        capture_method: "manual",
        amount_capturable: 1000,
        amount_received: null,
      });
      const captured = await api.capture(payment.payment_id as string);
      expect(captured).toMatchObject({ status: "succeeded", amount_received: 1000, amount_capturable: 0 });
      expect(await api.retrieve(payment.payment_id as string)).toEqual(captured);
    });

    it("create with confirm true and manual capture → requires_capture", async () => {
      const { merchant, api } = await merchantApi();
      const payment = await api.create({
        amount: 700,
        currency: "USD",
        profile_id: merchant.profileId,
        capture_method: "manual",
        confirm: true,
        payment_method_data: card(visa),
      });
      expect(payment).toMatchObject({ status: "requires_capture", amount_capturable: 700, amount_received: null });
    });

    it("a partial capture → succeeded with amount_received = the captured amount", async () => {
      const { merchant, api } = await merchantApi();
      const payment = await authorized(api, merchant, 1000);
      const captured = await api.capture(payment.payment_id as string, { amount_to_capture: 600 });
      expect(captured).toMatchObject({ status: "succeeded", amount: 1000, amount_received: 600, amount_capturable: 0 });
      // Partial capture happens once: the rest cannot be captured afterwards.
      await expectError(api.capture(payment.payment_id as string, { amount_to_capture: 400 }), "IR_14");
      expect(await api.retrieve(payment.payment_id as string)).toEqual(captured);
    });

    it("a capture above amount_capturable is 400 IR_05 naming amount_to_capture and changes nothing", async () => {
      const { merchant, api } = await merchantApi();
      const payment = await authorized(api, merchant, 1000);
      await expectError(api.capture(payment.payment_id as string, { amount_to_capture: 1001 }), "IR_05", "amount_to_capture");
      await expectError(api.capture(payment.payment_id as string, { amount_to_capture: 0 }), "IR_05", "amount_to_capture");
      expect(await api.retrieve(payment.payment_id as string)).toEqual(payment);
    });

    it("capture of a payment that is not in requires_capture is 400 IR_14 naming current and expected statuses", async () => {
      const { merchant, api } = await merchantApi();
      const succeeded = await api.create({
        amount: 100,
        currency: "USD",
        profile_id: merchant.profileId,
        confirm: true,
        payment_method_data: card(visa),
      });
      await expectError(api.capture(succeeded.payment_id as string), "IR_14", "succeeded", "requires_capture");
      const unconfirmed = await api.create({ amount: 100, currency: "USD", profile_id: merchant.profileId, capture_method: "manual" });
      await expectError(api.capture(unconfirmed.payment_id as string), "IR_14", "requires_payment_method", "requires_capture");
    });

    it("cancel from requires_capture → cancelled with the cancellation_reason", async () => {
      const { merchant, api } = await merchantApi();
      const payment = await authorized(api, merchant);
      const cancelled = await api.cancel(payment.payment_id as string, { cancellation_reason: "duplicate" });
      expect(cancelled).toMatchObject({
        status: "cancelled",
        cancellation_reason: "duplicate",
        amount_capturable: 0,
        amount_received: null,
      });
      expect(await api.retrieve(payment.payment_id as string)).toEqual(cancelled);
    });

    it("cancel from requires_payment_method and requires_confirmation → cancelled", async () => {
      const { merchant, api } = await merchantApi();
      const a = await api.create({ amount: 100, currency: "USD", profile_id: merchant.profileId });
      expect(await api.cancel(a.payment_id as string)).toMatchObject({ status: "cancelled", cancellation_reason: expect.any(String) });
      const b = await api.create({ amount: 100, currency: "USD", profile_id: merchant.profileId });
      expect((await api.update(b.payment_id as string, { amount: 200 })).status).toBe("requires_confirmation");
      expect(await api.cancel(b.payment_id as string, { cancellation_reason: "abandoned" })).toMatchObject({
        status: "cancelled",
        cancellation_reason: "abandoned",
      });
    });

    it("cancel of a succeeded payment is 400 IR_16", async () => {
      const { merchant, api } = await merchantApi();
      const payment = await api.create({
        amount: 100,
        currency: "USD",
        profile_id: merchant.profileId,
        confirm: true,
        payment_method_data: card(visa),
      });
      await expectError(api.cancel(payment.payment_id as string), "IR_16", "succeeded");
      expect(await api.retrieve(payment.payment_id as string)).toEqual(payment);
    });
  });

  describe("terminal statuses never change", () => {
    const terminal: Record<string, (api: PaymentApi, merchant: TestMerchant) => Promise<Json>> = {
      succeeded: (api, m) =>
        api.create({ amount: 100, currency: "USD", profile_id: m.profileId, confirm: true, payment_method_data: card(visa) }),
      "succeeded after a manual capture": async (api, m) => {
        const p = await api.create({
          amount: 100,
          currency: "USD",
          profile_id: m.profileId,
          capture_method: "manual",
          confirm: true,
          payment_method_data: card(visa),
        });
        return api.capture(p.payment_id as string, { amount_to_capture: 50 });
      },
      failed: (api, m) =>
        api.create({ amount: 100, currency: "USD", profile_id: m.profileId, confirm: true, payment_method_data: card(declined) }),
      cancelled: async (api, m) =>
        api.cancel((await api.create({ amount: 100, currency: "USD", profile_id: m.profileId })).payment_id as string),
    };

    it.each(Object.keys(terminal))("a %s payment refuses update, confirm, capture and cancel, and stays as it was", async (name) => {
      const { merchant, api } = await merchantApi();
      const payment = await terminal[name]!(api, merchant);
      const id = payment.payment_id as string;
      const status = payment.status as string;
      expect(["succeeded", "failed", "cancelled"]).toContain(status);
      const eventsBefore = await eventsOf(service, merchant.merchantId, id);
      clock.tick();

      await expectError(api.update(id, { amount: 5, description: "changed", metadata: { k: "v" } }), "IR_16", status);
      await expectError(api.update(id, { description: "changed" }), "IR_16", status);
      await expectError(api.confirm(id, { payment_method_data: card(visa) }), "IR_16", status);
      await expectError(api.capture(id), "IR_14", status);
      await expectError(api.cancel(id), "IR_16", status);

      expect(await api.retrieve(id)).toEqual(payment);
      expect(await eventsOf(service, merchant.merchantId, id)).toEqual(eventsBefore);
    });
  });

  describe("publishable keys", () => {
    it("retrieve needs the payment's client_secret: missing → IR_04, wrong → 403 IR_22, right → the payment", async () => {
      const { merchant, api } = await merchantApi();
      const publishable = restApi(await issueKey(service.url, merchant.merchantId, "sandbox", "publishable"));
      const payment = await api.create({ amount: 100, currency: "USD", profile_id: merchant.profileId });
      const other = await api.create({ amount: 200, currency: "USD", profile_id: merchant.profileId });
      const id = payment.payment_id as string;

      await expectError(publishable.retrieve(id), "IR_04", "client_secret");
      await expectError(publishable.retrieve(id, ""), "IR_04", "client_secret");
      await expectError(publishable.retrieve(id, `${payment.client_secret}x`), "IR_22");
      // Another payment's secret opens only that other payment.
      await expectError(publishable.retrieve(id, other.client_secret as string), "IR_22");
      expect(await publishable.retrieve(id, payment.client_secret as string)).toEqual(payment);
    });

    it("confirm needs the client_secret in the body: missing → IR_04, wrong → 403 IR_22, right → succeeded", async () => {
      const { merchant, api } = await merchantApi();
      const publishable = restApi(await issueKey(service.url, merchant.merchantId, "sandbox", "publishable"));
      const payment = await api.create({ amount: 100, currency: "USD", profile_id: merchant.profileId });
      const id = payment.payment_id as string;

      await expectError(publishable.confirm(id, { payment_method_data: card(visa) }), "IR_04", "client_secret");
      await expectError(publishable.confirm(id, { client_secret: "pay_x_secret_wrong", payment_method_data: card(visa) }), "IR_22");
      expect(await api.retrieve(id)).toEqual(payment);

      const confirmed = await publishable.confirm(id, { client_secret: payment.client_secret!, payment_method_data: card(visa) });
      expect(confirmed).toMatchObject({ payment_id: id, status: "succeeded", amount_received: 100 });
      expect(await api.retrieve(id)).toEqual(confirmed);
    });

    it("a publishable key may not create, update, capture, cancel or list: 403 IR_22", async () => {
      const { merchant, api } = await merchantApi();
      const publishable = restApi(await issueKey(service.url, merchant.merchantId, "sandbox", "publishable"));
      const payment = await api.create({
        amount: 100,
        currency: "USD",
        profile_id: merchant.profileId,
        capture_method: "manual",
        confirm: true,
        payment_method_data: card(visa),
      });
      const id = payment.payment_id as string;

      await expectError(publishable.create({ amount: 100, currency: "USD", profile_id: merchant.profileId }), "IR_22");
      await expectError(publishable.update(id, { description: "x" }), "IR_22");
      await expectError(publishable.capture(id), "IR_22");
      await expectError(publishable.cancel(id), "IR_22");
      await expectError(publishable.list({}), "IR_22");
      expect(await api.retrieve(id)).toEqual(payment);
      expect((await api.list({})).total_count).toBe(1);
    });
  });

  it("a production key with no processor configured: create is 400 IR_16 saying so", async () => {
    const { merchant } = await merchantApi();
    const production = restApi(await issueKey(service.url, merchant.merchantId, "production", "secret"));
    const message = await expectError(
      production.create({ amount: 100, currency: "USD", profile_id: merchant.profileId, confirm: true, payment_method_data: card(visa) }),
      "IR_16",
    );
    expect(message).toMatch(/no .*processor is configured/i);
    await expectError(production.create({ amount: 100, currency: "USD", profile_id: merchant.profileId }), "IR_16", "processor");
    expect((await production.list({})).total_count).toBe(0);
  });

  describe("events", () => {
    it("each status change writes payment.<status> whose data.object is what retrieve returned then", async () => {
      const { merchant, api } = await merchantApi();
      const seen: Json[] = [];
      const step = async (action: Promise<Json>): Promise<Json> => {
        clock.tick();
        const answer = await action;
        const retrieved = await api.retrieve(answer.payment_id as string);
        expect(retrieved).toEqual(answer);
        seen.push(retrieved);
        return retrieved;
      };

      const created = await step(api.create({ amount: 1000, currency: "USD", profile_id: merchant.profileId, capture_method: "manual" }));
      const id = created.payment_id as string;
      await step(api.update(id, { amount: 1200 }));
      // An update that keeps the status is not a status change: no event.
      clock.tick();
      await api.update(id, { description: "no new status" });
      seen.push(await api.retrieve(id));
      await step(api.confirm(id, { payment_method_data: card(visa) }));
      await step(api.capture(id, { amount_to_capture: 1000 }));

      const events = await eventsOf(service, merchant.merchantId, id);
      expect(events.map((e) => e.type)).toEqual([
        "payment.requires_payment_method",
        "payment.requires_confirmation",
        "payment.requires_capture",
        "payment.succeeded",
      ]);
      expect(events.map((e) => e.object)).toEqual([seen[0], seen[1], seen[3], seen[4]]);
    });

    it.each([
      ["succeeded", visa],
      ["failed", insufficientFunds],
    ])("create with confirm true writes one payment.%s event with the object as retrieved", async (status, number) => {
      const { merchant, api } = await merchantApi();
      const payment = await api.create({
        amount: 100,
        currency: "USD",
        profile_id: merchant.profileId,
        confirm: true,
        payment_method_data: card(number),
      });
      expect(payment.status).toBe(status);
      const retrieved = await api.retrieve(payment.payment_id as string);
      expect(await eventsOf(service, merchant.merchantId, payment.payment_id as string)).toEqual([
        { type: `payment.${status}`, object: retrieved },
      ]);
    });

    it("cancel writes payment.cancelled with the object as retrieved", async () => {
      const { merchant, api } = await merchantApi();
      const created = await api.create({ amount: 100, currency: "USD", profile_id: merchant.profileId });
      clock.tick();
      const cancelled = await api.cancel(created.payment_id as string, { cancellation_reason: "fraudulent" });
      const events = await eventsOf(service, merchant.merchantId, created.payment_id as string);
      expect(events).toEqual([
        { type: "payment.requires_payment_method", object: created },
        { type: "payment.cancelled", object: cancelled },
      ]);
      expect(await api.retrieve(created.payment_id as string)).toEqual(cancelled);
    });

    it("a refused request writes no event and no payment", async () => {
      const { merchant, api } = await merchantApi();
      const base = { amount: 100, currency: "USD", profile_id: merchant.profileId };
      await expectError(api.create({ ...base, amount: 0 }), "IR_05", "amount");
      await expectError(api.create({ ...base, currency: "XXX" }), "IR_05", "currency");
      await expectError(api.create({ ...base, confirm: true, payment_method_data: card("4012888888881881") }), "IR_05");
      await expectError(api.create({ ...base, confirm: true, payment_method_data: card(visa, { card_cvc: undefined }) }), "IR_04");
      await expectError(api.create({ ...base, payment_method_data: card(visa) }), "IR_05");
      await expectError(api.create({ ...base, customer_id: "cus_nobody" }), "HE_02");
      expect(await rowsOfMerchant(merchant.merchantId)).toEqual({ events: 0, payments: 0 });
    });
  });

  describe("time-based moves", () => {
    it("scheduled capture: requires_capture until capture_on, then succeeded once the clock passes it", async () => {
      const { merchant, api } = await merchantApi();
      const captureOn = new Date(clock.now().getTime() + 2 * hour).toISOString();
      const created = await api.create({
        amount: 4200,
        currency: "USD",
        profile_id: merchant.profileId,
        capture_method: "scheduled",
        capture_on: captureOn,
      });
      expect(created).toMatchObject({ capture_method: "scheduled", capture_on: captureOn, status: "requires_payment_method" });
      const id = created.payment_id as string;

      const confirmed = await api.confirm(id, { payment_method_data: card(visa) });
      expect(confirmed).toMatchObject({ status: "requires_capture", amount_capturable: 4200, amount_received: null });

      // Not yet due: nothing happens.
      clock.advance(2 * hour - 1000);
      await service.jobs.runDue();
      expect(await api.retrieve(id)).toEqual(confirmed);

      clock.advance(2000);
      await service.jobs.runDue();
      const captured = await api.retrieve(id);
      expect(captured).toMatchObject({ status: "succeeded", amount_received: 4200, amount_capturable: 0 });
      expect((await eventsOf(service, merchant.merchantId, id)).at(-1)).toEqual({ type: "payment.succeeded", object: captured });
    });

    it("scheduled capture needs a capture_on in the future; capture_on belongs to scheduled capture only", async () => {
      const { merchant, api } = await merchantApi();
      const base = { amount: 100, currency: "USD", profile_id: merchant.profileId };
      await expectError(api.create({ ...base, capture_method: "scheduled" }), "IR_04", "capture_on");
      await expectError(
        api.create({ ...base, capture_method: "scheduled", capture_on: new Date(clock.now().getTime() - 1000).toISOString() }),
        "IR_05",
        "capture_on",
      );
      await expectError(
        api.create({ ...base, capture_method: "manual", capture_on: new Date(clock.now().getTime() + hour).toISOString() }),
        "IR_05",
        "capture_on",
      );
      expect((await api.list({})).total_count).toBe(0);
    });

    it("a manual authorization not captured within 7 days → cancelled with cancellation_reason expired", async () => {
      const { merchant, api } = await merchantApi();
      const created = await api.create({ amount: 900, currency: "USD", profile_id: merchant.profileId, capture_method: "manual" });
      const id = created.payment_id as string;
      const authorized = await api.confirm(id, { payment_method_data: card(visa) });
      expect(authorized.status).toBe("requires_capture");

      clock.advance(7 * day - 60_000);
      await service.jobs.runDue();
      expect(await api.retrieve(id)).toEqual(authorized);

      clock.advance(120_000);
      await service.jobs.runDue();
      const expired = await api.retrieve(id);
      expect(expired).toMatchObject({ status: "cancelled", cancellation_reason: "expired", amount_capturable: 0, amount_received: null });
      expect((await eventsOf(service, merchant.merchantId, id)).at(-1)).toEqual({ type: "payment.cancelled", object: expired });
      await expectError(api.capture(id), "IR_14", "cancelled");
    });

    it("a manual authorization captured within 7 days stays succeeded after the 7 days pass", async () => {
      const { merchant, api } = await merchantApi();
      const authorized = await api.create({
        amount: 900,
        currency: "USD",
        profile_id: merchant.profileId,
        capture_method: "manual",
        confirm: true,
        payment_method_data: card(visa),
      });
      const id = authorized.payment_id as string;
      clock.advance(3 * day);
      const captured = await api.capture(id, { amount_to_capture: 500 });
      expect(captured).toMatchObject({ status: "succeeded", amount_received: 500 });

      clock.advance(5 * day);
      await service.jobs.runDue();
      expect(await api.retrieve(id)).toEqual(captured);
      expect((await eventsOf(service, merchant.merchantId, id)).map((e) => e.type)).toEqual([
        "payment.requires_capture",
        "payment.succeeded",
      ]);
    });

    it("a payment cancelled before capture_on is not captured when the time comes", async () => {
      const { merchant, api } = await merchantApi();
      const created = await api.create({
        amount: 300,
        currency: "USD",
        profile_id: merchant.profileId,
        capture_method: "scheduled",
        capture_on: new Date(clock.now().getTime() + hour).toISOString(),
        confirm: true,
        payment_method_data: card(visa),
      });
      expect(created.status).toBe("requires_capture");
      const cancelled = await api.cancel(created.payment_id as string);
      clock.advance(8 * day);
      await service.jobs.runDue();
      expect(await api.retrieve(created.payment_id as string)).toEqual(cancelled);
    });
  });
});

describe.each(["POST", "GET"] as const)("listing payments with %s", (listWith) => {
  /** Creates payments one clock tick apart, oldest first. */
  async function createInOrder(api: PaymentApi, bodies: Json[]): Promise<Json[]> {
    const created: Json[] = [];
    for (const body of bodies) {
      clock.tick();
      created.push(await api.create(body));
    }
    return created;
  }

  it("lists newest first with exact total_count and has_more across pages", async () => {
    const { merchant, api } = await merchantApi(listWith);
    const body = { amount: 100, currency: "USD", profile_id: merchant.profileId };
    const [p1, p2, p3] = await createInOrder(api, [body, body, body]);

    expect(await api.list({})).toEqual({ data: [p3, p2, p1], total_count: 3, has_more: false });
    expect(await api.list({ limit: 2 })).toEqual({ data: [p3, p2], total_count: 3, has_more: true });
    expect(await api.list({ limit: 2, offset: 2 })).toEqual({ data: [p1], total_count: 3, has_more: false });
    expect(await api.list({ limit: 1, offset: 1 })).toEqual({ data: [p2], total_count: 3, has_more: true });
    expect(await api.list({ offset: 3 })).toEqual({ data: [], total_count: 3, has_more: false });
  });

  it("returns 10 by default and up to 100", async () => {
    const { merchant, api } = await merchantApi(listWith);
    await Promise.all(Array.from({ length: 11 }, () => api.create({ amount: 100, currency: "USD", profile_id: merchant.profileId })));
    const page = await api.list({});
    expect(page.data).toHaveLength(10);
    expect(page).toMatchObject({ total_count: 11, has_more: true });
    expect(await api.list({ limit: 100 })).toMatchObject({ total_count: 11, has_more: false });
  });

  it("filters by status, customer_id, currency, created_gte and created_lte (inclusive)", async () => {
    const { merchant, api } = await merchantApi(listWith);
    const customer = await rest(service.url, "POST", "/customers", { apiKey: merchant.apiKey, body: {} });
    expect(customer.status).toBe(200);
    const customerId = customer.body.customer_id as string;
    const base = { amount: 100, profile_id: merchant.profileId };
    const [usdOpen, eurPaid, usdCustomer, eurFailed] = await createInOrder(api, [
      { ...base, currency: "USD" },
      { ...base, currency: "EUR", confirm: true, payment_method_data: card(visa) },
      { ...base, currency: "USD", customer_id: customerId, confirm: true, payment_method_data: card(visa) },
      { ...base, currency: "EUR", customer_id: customerId, confirm: true, payment_method_data: card(declined) },
    ]);

    expect(await api.list({ status: "succeeded" })).toEqual({ data: [usdCustomer, eurPaid], total_count: 2, has_more: false });
    expect(ids(await api.list({ status: "failed" }))).toEqual([eurFailed!.payment_id]);
    expect(ids(await api.list({ status: "requires_payment_method" }))).toEqual([usdOpen!.payment_id]);
    expect(await api.list({ status: "cancelled" })).toEqual({ data: [], total_count: 0, has_more: false });
    expect(ids(await api.list({ customer_id: customerId }))).toEqual([eurFailed!.payment_id, usdCustomer!.payment_id]);
    expect(ids(await api.list({ currency: "EUR" }))).toEqual([eurFailed!.payment_id, eurPaid!.payment_id]);
    expect(ids(await api.list({ currency: "usd" }))).toEqual([usdCustomer!.payment_id, usdOpen!.payment_id]);
    expect(ids(await api.list({ currency: "USD", status: "succeeded", customer_id: customerId }))).toEqual([usdCustomer!.payment_id]);

    expect(ids(await api.list({ created_gte: eurPaid!.created! }))).toEqual([eurFailed, usdCustomer, eurPaid].map((p) => p!.payment_id));
    expect(ids(await api.list({ created_lte: eurPaid!.created! }))).toEqual([eurPaid, usdOpen].map((p) => p!.payment_id));
    expect(await api.list({ created_gte: eurPaid!.created!, created_lte: usdCustomer!.created! })).toEqual({
      data: [usdCustomer, eurPaid],
      total_count: 2,
      has_more: false,
    });
    expect(await api.list({ created_gte: usdCustomer!.created!, limit: 1 })).toEqual({
      data: [eurFailed],
      total_count: 2,
      has_more: true,
    });
  });

  it("never lists another merchant's payments", async () => {
    const { merchant, api } = await merchantApi(listWith);
    const other = await merchantApi(listWith);
    const mine = await api.create({ amount: 100, currency: "USD", profile_id: merchant.profileId });
    await other.api.create({ amount: 100, currency: "USD", profile_id: other.merchant.profileId });
    await other.api.create({
      amount: 200,
      currency: "USD",
      profile_id: other.merchant.profileId,
      confirm: true,
      payment_method_data: card(visa),
    });
    expect(await api.list({})).toEqual({ data: [mine], total_count: 1, has_more: false });
    expect(await api.list({ status: "succeeded" })).toEqual({ data: [], total_count: 0, has_more: false });
  });

  it.each([0, 101])("refuses limit %i with 400 IR_06", async (limit) => {
    const { api } = await merchantApi(listWith);
    const failure = await api.list({ limit }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(RestFailure);
    expect(expectRestError((failure as RestFailure).response, 400, "IR_06")).toContain("limit");
  });

  it("refuses offset -1 with 400 IR_05 naming offset, and an unknown currency filter with IR_05", async () => {
    const { api } = await merchantApi(listWith);
    await expectError(api.list({ offset: -1 }), "IR_05", "offset");
    await expectError(api.list({ currency: "XXX" }), "IR_05", "currency");
  });
});

describe("payments over REST only", () => {
  it.each([
    ["fractional", 10.5],
    ["a string", "100"],
    ["a boolean", true],
    ["beyond JSON's safe integers", 2 ** 60],
  ])("refuses an amount that is %s with 400 IR_05 naming amount", async (_, amount) => {
    const merchant = await newMerchant(service.url);
    const res = await rest(service.url, "POST", "/payments", {
      apiKey: merchant.apiKey,
      body: { amount, currency: "USD", profile_id: merchant.profileId },
    });
    expect(expectRestError(res, 400, "IR_05")).toContain("amount");
    expect(await rowsOfMerchant(merchant.merchantId)).toEqual({ events: 0, payments: 0 });
  });

  it("refuses a fractional amount_to_capture with 400 IR_05 naming it", async () => {
    const merchant = await newMerchant(service.url);
    const api = restApi(merchant.apiKey);
    const payment = await api.create({
      amount: 100,
      currency: "USD",
      profile_id: merchant.profileId,
      capture_method: "manual",
      confirm: true,
      payment_method_data: card(visa),
    });
    const res = await rest(service.url, "POST", `/payments/${payment.payment_id}/capture`, {
      apiKey: merchant.apiKey,
      body: { amount_to_capture: 50.5 },
    });
    expect(expectRestError(res, 400, "IR_05")).toContain("amount_to_capture");
    expect(await api.retrieve(payment.payment_id as string)).toEqual(payment);
  });

  it("retrieve with a publishable key takes client_secret as a query parameter", async () => {
    const merchant = await newMerchant(service.url);
    const publishableKey = await issueKey(service.url, merchant.merchantId, "sandbox", "publishable");
    const created = await rest(service.url, "POST", "/payments", {
      apiKey: merchant.apiKey,
      body: { amount: 100, currency: "USD", profile_id: merchant.profileId },
    });
    const path = `/payments/${created.body.payment_id}`;
    const ok = await rest(service.url, "GET", `${path}?client_secret=${encodeURIComponent(created.body.client_secret)}`, {
      apiKey: publishableKey,
    });
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual(created.body);
    expect(expectRestError(await rest(service.url, "GET", path, { apiKey: publishableKey }), 400, "IR_04")).toContain("client_secret");
    expectRestError(await rest(service.url, "GET", `${path}?client_secret=nope`, { apiKey: publishableKey }), 403, "IR_22");
    // The secret key does not need it.
    expect((await rest(service.url, "GET", path, { apiKey: merchant.apiKey })).body).toEqual(created.body);
  });

  it("lists the same page via GET query parameters and via POST body", async () => {
    const merchant = await newMerchant(service.url);
    const api = restApi(merchant.apiKey);
    const created: Json[] = [];
    for (const currency of ["USD", "EUR", "USD"]) {
      clock.tick();
      created.push(await api.create({ amount: 100, currency, profile_id: merchant.profileId }));
    }
    const query = `limit=1&offset=1&currency=usd&status=requires_payment_method&created_lte=${encodeURIComponent(created[2]!.created as string)}`;
    const viaGet = await rest(service.url, "GET", `/payments/list?${query}`, { apiKey: merchant.apiKey });
    const viaPost = await rest(service.url, "POST", "/payments/list", {
      apiKey: merchant.apiKey,
      body: { limit: 1, offset: 1, currency: "usd", status: "requires_payment_method", created_lte: created[2]!.created },
    });
    expect(viaGet.status).toBe(200);
    expect(viaGet.body).toEqual(viaPost.body);
    expect(viaGet.body).toEqual({ data: [created[0]], total_count: 2, has_more: false });
  });

  it("refuses an unknown status filter with 400 IR_05 naming status", async () => {
    const merchant = await newMerchant(service.url);
    const res = await rest(service.url, "GET", "/payments/list?status=done", { apiKey: merchant.apiKey });
    expect(expectRestError(res, 400, "IR_05")).toContain("status");
  });
});
