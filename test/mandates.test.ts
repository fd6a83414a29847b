import { describe, expect, it } from "vitest";
import { visaCard } from "./support/cards.js";
import { TestClock } from "./support/clock.js";
import { eventsOf } from "./support/events.js";
import { issueKey, newMerchant, type TestMerchant } from "./support/merchant.js";
import { expectError, type Json, restCaller, restList } from "./support/resource-api.js";
import { runningService } from "./support/running.js";
import { formActionOf } from "./support/three-ds.js";

/*
 * Saving a payment's card, mandates and merchant-initiated payments (decisions §10): each rule once,
 * over REST, on both databases. Concurrent charges under one single-use mandate on two instances are
 * test/mandates-concurrency.test.ts's; protocol parity is test/parity's.
 */

const clock = new TestClock();
const service = runningService({}, clock);

/** What the tests call, as one merchant's secret key sees it; results use the REST field names. */
interface Api {
  readonly merchant: TestMerchant;
  pay(fields: Json): Promise<Json>;
  confirm(paymentId: string, fields: Json): Promise<Json>;
  retrievePayment(paymentId: string): Promise<Json>;
  refund(paymentId: string): Promise<Json>;
  capture(paymentId: string): Promise<Json>;
  createCustomer(): Promise<string>;
  deleteCustomer(customerId: string): Promise<Json>;
  saveCard(customerId: string, cardNumber?: string): Promise<string>;
  paymentMethod(id: string): Promise<Json>;
  deletePaymentMethod(id: string): Promise<Json>;
  paymentMethodsOf(customerId: string): Promise<Json>;
  mandate(id: string): Promise<Json>;
  revoke(id: string): Promise<Json>;
  mandatesOf(customerId: string, params?: Json): Promise<Json>;
}

async function merchantApi(): Promise<Api> {
  const merchant = await newMerchant(service.url);
  const call = restCaller(service.url, merchant.apiKey);
  return {
    merchant,
    pay: (fields) => call("POST", "/payments", { amount: 1000, currency: "USD", profile_id: merchant.profileId, confirm: true, ...fields }),
    confirm: (paymentId, fields) => call("POST", `/payments/${paymentId}/confirm`, fields),
    retrievePayment: (paymentId) => call("GET", `/payments/${paymentId}`),
    refund: (paymentId) => call("POST", "/refunds", { payment_id: paymentId }),
    capture: (paymentId) => call("POST", `/payments/${paymentId}/capture`, {}),
    createCustomer: async () => String((await call("POST", "/customers", {})).customer_id),
    deleteCustomer: (customerId) => call("DELETE", `/customers/${customerId}`),
    saveCard: async (customerId, cardNumber = visaCard.card_number) =>
      String(
        (
          await call("POST", "/payment_methods", {
            payment_method: "card",
            card: { card_number: cardNumber, card_exp_month: "12", card_exp_year: "2034" },
            customer_id: customerId,
          })
        ).payment_method_id,
      ),
    paymentMethod: (id) => call("GET", `/payment_methods/${id}`),
    deletePaymentMethod: (id) => call("DELETE", `/payment_methods/${id}`),
    paymentMethodsOf: (customerId) => call("GET", `/customers/${customerId}/payment_methods`),
    mandate: (id) => call("GET", `/mandates/${encodeURIComponent(id)}`),
    revoke: (id) => call("POST", `/mandates/${encodeURIComponent(id)}/revoke`, {}),
    mandatesOf: (customerId, params = {}) => restList(call, "GET", `/customers/${customerId}/mandates`)(params),
  };
}

/** A card sent with a payment: the test card `number`, valid for years. */
function card(number: string = visaCard.card_number): Json {
  return { card: { card_number: number, card_exp_month: "12", card_exp_year: "2034", card_cvc: "123" } };
}

const acceptance = {
  acceptance_type: "online",
  accepted_at: "2026-01-31T12:00:00Z",
  online: { ip_address: "192.0.2.1", user_agent: "Mozilla/5.0" },
};

/** An off-session setup of `number` for the customer: a zero-amount payment that saves the card with a mandate. */
async function offSessionSetup(api: Api, customerId: string, fields: Json = {}, number?: string): Promise<Json> {
  return api.pay({
    amount: 0,
    customer_id: customerId,
    setup_future_usage: "off_session",
    customer_acceptance: acceptance,
    payment_method_data: card(number),
    ...fields,
  });
}

/** An off-session setup of a card that asks for 3DS on-session, authenticated by the customer: the payment, succeeded. */
async function authenticatedSetup(api: Api, customerId: string, number: string, fields: Json = {}): Promise<Json> {
  const setup = await offSessionSetup(api, customerId, { return_url: "https://shop.example/done", ...fields }, number);
  expect(setup.status).toBe("requires_action");
  const completed = await fetch(await formActionOf(String((setup.next_action as Json).redirect_to_url), "complete"), {
    method: "POST",
    redirect: "manual",
  });
  expect(completed.status).toBe(303);
  const authenticated = await api.retrievePayment(String(setup.payment_id));
  expect(authenticated.status).toBe("succeeded");
  return authenticated;
}

/** A merchant-initiated payment of the customer's saved card. */
function offSessionCharge(api: Api, customerId: string, paymentMethodId: string, fields: Json = {}): Promise<Json> {
  return api.pay({ customer_id: customerId, payment_method_id: paymentMethodId, off_session: true, ...fields });
}

/** The types of the events of an object, oldest first. */
async function eventTypesOf(api: Api, objectId: string): Promise<string[]> {
  return (await eventsOf(service, api.merchant.merchantId, objectId)).map((event) => event.type);
}

describe("saving a payment's card (setup_future_usage)", () => {
  it("saves the card of a payment that succeeds for its customer, shown on the payment and announced attached", async () => {
    const api = await merchantApi();
    const customerId = await api.createCustomer();
    const payment = await api.pay({ customer_id: customerId, setup_future_usage: "on_session", payment_method_data: card() });
    expect(payment).toMatchObject({ status: "succeeded", setup_future_usage: "on_session", mandate_id: null, off_session: false });
    const id = String(payment.payment_method_id);
    expect(id).toMatch(/^pm_/);
    expect(await api.paymentMethod(id)).toMatchObject({
      customer_id: customerId,
      card: { last4: "4242", exp_month: "12", exp_year: "2034" },
    });
    expect(((await api.paymentMethodsOf(customerId)).data as Json[]).map((m) => m.payment_method_id)).toEqual([id]);
    const events = await eventsOf(service, api.merchant.merchantId, id);
    expect(events).toEqual([
      { type: "payment_method.attached", object: expect.objectContaining({ payment_method_id: id, customer_id: customerId }) },
    ]);
  });

  it("the same card saved by two payments, or saved before, is one payment method", async () => {
    const api = await merchantApi();
    const customerId = await api.createCustomer();
    const saved = await api.saveCard(customerId);
    const first = await api.pay({ customer_id: customerId, setup_future_usage: "on_session", payment_method_data: card() });
    const second = await api.pay({
      customer_id: customerId,
      setup_future_usage: "off_session",
      customer_acceptance: acceptance,
      payment_method_data: card(),
    });
    expect([first.payment_method_id, second.payment_method_id]).toEqual([saved, saved]);
    expect((await api.paymentMethodsOf(customerId)).total_count).toBe(1);
  });

  it("two setups of one new card share its pending payment method: the one that fails hands it to the other, which saves it", async () => {
    const api = await merchantApi();
    const customerId = await api.createCustomer();
    const setup = () =>
      api.pay({
        customer_id: customerId,
        setup_future_usage: "on_session",
        payment_method_data: card("4000000000003220"),
        return_url: "https://shop.example/done",
      });
    const [first, second] = [await setup(), await setup()];
    expect([first.status, second.status]).toEqual(["requires_action", "requires_action"]);
    expect(second.payment_method_id).toBe(first.payment_method_id);
    const answer = (payment: Json, button: "complete" | "fail") =>
      formActionOf(String((payment.next_action as Json).redirect_to_url), button).then((url) =>
        fetch(url, { method: "POST", redirect: "manual" }),
      );
    await answer(first, "fail");
    expect(await api.retrievePayment(String(first.payment_id))).toMatchObject({ status: "failed" });
    await answer(second, "complete");
    expect(await api.retrievePayment(String(second.payment_id))).toMatchObject({ status: "succeeded" });
    expect(await api.paymentMethod(String(first.payment_method_id))).toMatchObject({ customer_id: customerId });
    expect((await api.paymentMethodsOf(customerId)).total_count).toBe(1);
  });

  it("a declined card saves nothing: the payment fails and the customer has no payment method", async () => {
    const api = await merchantApi();
    const customerId = await api.createCustomer();
    const payment = await offSessionSetup(api, customerId, {}, "4000000000000002");
    expect(payment).toMatchObject({ status: "failed", error_code: "card_declined", mandate_id: null });
    await expectError(api.paymentMethod(String(payment.payment_method_id)), "HE_02");
    expect((await api.paymentMethodsOf(customerId)).total_count).toBe(0);
    expect((await api.mandatesOf(customerId)).total_count).toBe(0);
  });

  it("a zero-amount setup verifies the card and charges nothing: nothing captured, capturable or refundable", async () => {
    const api = await merchantApi();
    const customerId = await api.createCustomer();
    const payment = await offSessionSetup(api, customerId);
    expect(payment).toMatchObject({ status: "succeeded", amount: 0, amount_received: 0, amount_capturable: 0 });
    await expectError(api.capture(String(payment.payment_id)), "IR_14");
    await expectError(api.refund(String(payment.payment_id)), "IR_13");
  });

  it("a confirm saves the card when it asks to, for the payment's customer", async () => {
    const api = await merchantApi();
    const customerId = await api.createCustomer();
    const created = await api.pay({ confirm: false, customer_id: customerId });
    const confirmed = await api.confirm(String(created.payment_id), {
      payment_method_data: card(),
      setup_future_usage: "off_session",
      customer_acceptance: acceptance,
      mandate_data: { type: "single_use" },
    });
    expect(confirmed).toMatchObject({ status: "succeeded", setup_future_usage: "off_session", mandate_id: expect.stringMatching(/^man_/) });
    expect(await api.mandate(String(confirmed.mandate_id))).toMatchObject({
      status: "active",
      type: "single_use",
      customer_id: customerId,
      payment_method_id: confirmed.payment_method_id,
    });
  });

  it("a publishable key confirms a setup the merchant created, with the customer's acceptance, but cannot ask for one itself", async () => {
    const api = await merchantApi();
    const customerId = await api.createCustomer();
    const publishable = restCaller(service.url, await issueKey(service.url, api.merchant.merchantId, "sandbox", "publishable"));
    const created = await api.pay({
      amount: 0,
      confirm: false,
      customer_id: customerId,
      setup_future_usage: "off_session",
      customer_acceptance: acceptance,
      mandate_data: { type: "single_use", amount_limit: 2500 },
    });
    const confirm = (fields: Json) =>
      publishable("POST", `/payments/${created.payment_id}/confirm`, {
        client_secret: String(created.client_secret),
        payment_method_data: card(),
        ...fields,
      });
    await expectError(confirm({ setup_future_usage: "on_session" }), "IR_22", "setup_future_usage");
    await expectError(confirm({ mandate_data: { type: "single_use" } }), "IR_22", "setup_future_usage");
    const confirmed = await confirm({
      customer_acceptance: { ...acceptance, online: { ip_address: "198.51.100.7", user_agent: "Firefox" } },
    });
    expect(confirmed).toMatchObject({ status: "succeeded", setup_future_usage: "off_session", mandate_id: expect.stringMatching(/^man_/) });
    expect(await api.mandate(String(confirmed.mandate_id))).toMatchObject({
      type: "single_use",
      amount_limit: 2500,
      customer_acceptance: { online: { ip_address: "198.51.100.7", user_agent: "Firefox" } },
    });
  });

  it("a client-side token a setup pays with becomes the customer's payment method", async () => {
    const api = await merchantApi();
    const publishable = restCaller(service.url, await issueKey(service.url, api.merchant.merchantId, "sandbox", "publishable"));
    const token = await publishable("POST", "/payment_methods", {
      payment_method: "card",
      card: { card_number: visaCard.card_number, card_exp_month: "12", card_exp_year: "2034" },
    });
    const customerId = await api.createCustomer();
    const payment = await api.pay({
      customer_id: customerId,
      setup_future_usage: "on_session",
      payment_method_id: String(token.payment_method_id),
    });
    expect(payment).toMatchObject({ status: "succeeded", payment_method_id: token.payment_method_id });
    expect(await api.paymentMethod(String(token.payment_method_id))).toMatchObject({ customer_id: customerId });
    // Now the customer's, it pays again.
    expect(await api.pay({ customer_id: customerId, payment_method_id: String(token.payment_method_id) })).toMatchObject({
      status: "succeeded",
    });
  });

  it("refuses what a setup cannot be: no customer, amount 0 without a setup or with a manual capture, a mandate without acceptance", async () => {
    const api = await merchantApi();
    const customerId = await api.createCustomer();
    await expectError(api.pay({ setup_future_usage: "on_session", payment_method_data: card() }), "IR_04", "customer_id");
    await expectError(api.pay({ amount: 0, payment_method_data: card() }), "IR_05", "amount");
    await expectError(
      api.pay({
        amount: 0,
        customer_id: customerId,
        setup_future_usage: "on_session",
        capture_method: "manual",
        payment_method_data: card(),
      }),
      "IR_05",
      "capture_method",
    );
    await expectError(offSessionSetup(api, customerId, { customer_acceptance: null }), "IR_04", "customer_acceptance");
    await expectError(
      offSessionSetup(api, customerId, { customer_acceptance: { acceptance_type: "online" } }),
      "IR_04",
      "customer_acceptance.online",
    );
    await expectError(
      offSessionSetup(api, customerId, {
        customer_acceptance: { ...acceptance, online: { ip_address: "not an address", user_agent: "x" } },
      }),
      "IR_05",
      "customer_acceptance.online.ip_address",
    );
    await expectError(
      api.pay({
        customer_id: customerId,
        setup_future_usage: "on_session",
        mandate_data: { type: "single_use" },
        payment_method_data: card(),
      }),
      "IR_05",
      "mandate_data",
    );
    await expectError(offSessionSetup(api, "cus_nobody"), "HE_02", "customer_id");
    expect((await api.paymentMethodsOf(customerId)).total_count).toBe(0);
  });
});

describe("mandates", () => {
  it("an off-session setup makes an active mandate with the acceptance, shown on the payment and announced", async () => {
    const api = await merchantApi();
    const customerId = await api.createCustomer();
    const setup = await offSessionSetup(api, customerId, { mandate_data: { amount_limit: 5000 } });
    const mandateId = String(setup.mandate_id);
    const mandate = await api.mandate(mandateId);
    expect(mandate).toEqual({
      mandate_id: mandateId,
      merchant_id: api.merchant.merchantId,
      customer_id: customerId,
      payment_method_id: setup.payment_method_id,
      status: "active",
      type: "multi_use",
      amount_limit: 5000,
      currency: "USD",
      customer_acceptance: { ...acceptance, accepted_at: "2026-01-31T12:00:00.000Z" },
      created: expect.any(String),
      updated: expect.any(String),
    });
    expect(await eventTypesOf(api, mandateId)).toEqual(["mandate.active"]);
    expect((await api.mandatesOf(customerId)).data).toEqual([mandate]);
    await expectError(api.mandatesOf("cus_nobody"), "HE_02", "customer_id");
  });

  it("revoking makes it revoked, once; payments under it are refused", async () => {
    const api = await merchantApi();
    const customerId = await api.createCustomer();
    const setup = await offSessionSetup(api, customerId);
    const mandateId = String(setup.mandate_id);
    clock.tick();
    expect(await api.revoke(mandateId)).toMatchObject({ mandate_id: mandateId, status: "revoked" });
    await expectError(api.revoke(mandateId), "IR_16", "revoked");
    await expectError(offSessionCharge(api, customerId, String(setup.payment_method_id)), "IR_16", "payment_method_id");
    await expectError(offSessionCharge(api, customerId, String(setup.payment_method_id), { mandate_id: mandateId }), "IR_16", "mandate_id");
    expect(await eventTypesOf(api, mandateId)).toEqual(["mandate.active", "mandate.revoked"]);
  });

  it("deleting the payment method, or the customer, revokes its mandates and announces it detached", async () => {
    const api = await merchantApi();
    const customerId = await api.createCustomer();
    const first = await offSessionSetup(api, customerId);
    clock.tick();
    await api.deletePaymentMethod(String(first.payment_method_id));
    expect(await api.mandate(String(first.mandate_id))).toMatchObject({ status: "revoked" });
    expect(await eventTypesOf(api, String(first.payment_method_id))).toEqual(["payment_method.attached", "payment_method.detached"]);

    const second = await offSessionSetup(api, customerId);
    clock.tick();
    await api.deleteCustomer(customerId);
    expect(await api.mandate(String(second.mandate_id))).toMatchObject({ status: "revoked" });
    expect(await eventTypesOf(api, String(second.payment_method_id))).toEqual(["payment_method.attached", "payment_method.detached"]);
  });

  it("another merchant's mandate, or the other environment's, is 404", async () => {
    const a = await merchantApi();
    const b = await merchantApi();
    const setup = await offSessionSetup(a, await a.createCustomer());
    const mandateId = String(setup.mandate_id);
    await expectError(b.mandate(mandateId), "HE_02");
    await expectError(b.revoke(mandateId), "HE_02");
    const production = restCaller(service.url, await issueKey(service.url, a.merchant.merchantId, "production", "secret"));
    await expectError(production("GET", `/mandates/${mandateId}`), "HE_02");
    expect(await a.mandate(mandateId)).toMatchObject({ status: "active" });
  });
});

describe("merchant-initiated payments (off_session)", () => {
  it("charge a saved card under its mandate, again and again, without the customer", async () => {
    const api = await merchantApi();
    const customerId = await api.createCustomer();
    const setup = await offSessionSetup(api, customerId);
    const paymentMethodId = String(setup.payment_method_id);
    for (const amount of [1500, 2500]) {
      const charge = await offSessionCharge(api, customerId, paymentMethodId, { amount });
      expect(charge).toMatchObject({
        status: "succeeded",
        amount_received: amount,
        off_session: true,
        mandate_id: setup.mandate_id,
        payment_method_id: paymentMethodId,
        payment_method_data: { card: { last4: "4242" } },
      });
    }
    // The customer is the payment method's when the payment names none.
    const named = await api.pay({ payment_method_id: paymentMethodId, off_session: true });
    expect(named).toMatchObject({ status: "succeeded", customer_id: customerId });
  });

  it("a single-use mandate allows one payment, then is inactive", async () => {
    const api = await merchantApi();
    const customerId = await api.createCustomer();
    const setup = await offSessionSetup(api, customerId, { mandate_data: { type: "single_use" } });
    const paymentMethodId = String(setup.payment_method_id);
    clock.tick();
    expect(await offSessionCharge(api, customerId, paymentMethodId)).toMatchObject({ status: "succeeded" });
    expect(await api.mandate(String(setup.mandate_id))).toMatchObject({ status: "inactive" });
    await expectError(offSessionCharge(api, customerId, paymentMethodId), "IR_16", "payment_method_id");
    expect(await eventTypesOf(api, String(setup.mandate_id))).toEqual(["mandate.active", "mandate.inactive"]);
  });

  it("a single-use mandate a failed payment took is given back, still active", async () => {
    const api = await merchantApi();
    const customerId = await api.createCustomer();
    const setup = await authenticatedSetup(api, customerId, "4000002760003184", { mandate_data: { type: "single_use" } });
    const paymentMethodId = String(setup.payment_method_id);
    for (let i = 0; i < 2; i++) {
      expect(await offSessionCharge(api, customerId, paymentMethodId)).toMatchObject({
        status: "failed",
        error_code: "authentication_required",
      });
      expect(await api.mandate(String(setup.mandate_id))).toMatchObject({ status: "active" });
    }
  });

  it("refuses a charge above the mandate's limit or in another currency", async () => {
    const api = await merchantApi();
    const customerId = await api.createCustomer();
    const setup = await offSessionSetup(api, customerId, { mandate_data: { amount_limit: 1000 } });
    const paymentMethodId = String(setup.payment_method_id);
    await expectError(offSessionCharge(api, customerId, paymentMethodId, { amount: 1001 }), "IR_16", "at most 1000");
    await expectError(offSessionCharge(api, customerId, paymentMethodId, { amount: 500, currency: "EUR" }), "IR_16", "USD");
    expect(await offSessionCharge(api, customerId, paymentMethodId, { amount: 1000 })).toMatchObject({ status: "succeeded" });
  });

  it("refuses what is not a merchant-initiated payment of a saved card", async () => {
    const api = await merchantApi();
    const customerId = await api.createCustomer();
    const setup = await offSessionSetup(api, customerId);
    const other = await offSessionSetup(api, customerId, {}, "5555555555554444");
    const paymentMethodId = String(setup.payment_method_id);
    await expectError(offSessionCharge(api, customerId, paymentMethodId, { confirm: false }), "IR_05", "off_session");
    await expectError(api.pay({ customer_id: customerId, off_session: true }), "IR_04", "payment_method_id");
    await expectError(api.pay({ customer_id: customerId, off_session: true, payment_method_data: card() }), "IR_05", "payment_method_data");
    await expectError(offSessionCharge(api, customerId, paymentMethodId, { setup_future_usage: "on_session" }), "IR_06");
    await expectError(offSessionCharge(api, customerId, paymentMethodId, { mandate_id: String(other.mandate_id) }), "IR_05", "mandate_id");
    await expectError(offSessionCharge(api, customerId, paymentMethodId, { mandate_id: "man_nothing" }), "HE_02", "mandate_id");
    await expectError(
      api.pay({ customer_id: customerId, payment_method_id: paymentMethodId, mandate_id: String(setup.mandate_id) }),
      "IR_05",
      "mandate_id",
    );
    const publishable = restCaller(service.url, await issueKey(service.url, api.merchant.merchantId, "sandbox", "publishable"));
    const token = await publishable("POST", "/payment_methods", { payment_method: "card", card: card().card as Json });
    await expectError(offSessionCharge(api, customerId, String(token.payment_method_id)), "IR_05", "client-side token");
  });

  it("the 3DS card asks for authentication on-session and succeeds off-session under a mandate", async () => {
    const api = await merchantApi();
    const customerId = await api.createCustomer();
    const pending = await offSessionSetup(api, customerId, { return_url: "https://shop.example/done" }, "4000000000003220");
    expect(pending).toMatchObject({ status: "requires_action", mandate_id: null });
    expect((await api.mandatesOf(customerId)).total_count).toBe(0);
    await expectError(api.paymentMethod(String(pending.payment_method_id)), "HE_02");
    const setup = await authenticatedSetup(api, customerId, "4000000000003220");
    expect(await api.mandate(String(setup.mandate_id))).toMatchObject({ status: "active", payment_method_id: pending.payment_method_id });
    const charge = await offSessionCharge(api, customerId, String(setup.payment_method_id));
    expect(charge).toMatchObject({ status: "succeeded", next_action: null });
  });

  it("the card that always asks for authentication fails off-session with authentication_required", async () => {
    const api = await merchantApi();
    const customerId = await api.createCustomer();
    const setup = await authenticatedSetup(api, customerId, "4000002760003184");
    const paymentMethodId = String(setup.payment_method_id);
    const onSession = await api.pay({
      customer_id: customerId,
      payment_method_id: paymentMethodId,
      return_url: "https://shop.example/done",
    });
    expect(onSession.status).toBe("requires_action");
    const charge = await offSessionCharge(api, customerId, paymentMethodId);
    expect(charge).toMatchObject({ status: "failed", error_code: "authentication_required", mandate_id: setup.mandate_id });
  });

  it("a saved card past its expiry on the service's clock fails off-session with expired_card", async () => {
    const api = await merchantApi();
    const customerId = await api.createCustomer();
    const setup = await offSessionSetup(api, customerId);
    const expiresAfter = Date.UTC(2035, 0, 1) - clock.now().getTime();
    clock.advance(expiresAfter + 1000);
    try {
      const charge = await offSessionCharge(api, customerId, String(setup.payment_method_id));
      expect(charge).toMatchObject({ status: "failed", error_code: "expired_card" });
    } finally {
      clock.advance(-(expiresAfter + 1000));
    }
  });
});
