import { describe, expect, it } from "vitest";
import { reapExpiredTokens } from "../src/payment-methods/store.js";
import { visaCard } from "./support/cards.js";
import { TestClock } from "./support/clock.js";
import { issueKey, newMerchant, type TestMerchant } from "./support/merchant.js";
import { expectError, type Json, restCaller, restList } from "./support/resource-api.js";
import { runningService } from "./support/running.js";

/*
 * Saved payment methods (decisions §10): each rule once, over REST, on both databases. That every RPC
 * carries the same request and answer over Connect, gRPC and gRPC-Web is the protocol-parity suite's
 * subject (test/parity).
 */

const service = runningService();

/** The payment method operations, as one caller sees them; results use the REST field names. */
interface PaymentMethodApi {
  create(body: Json): Promise<Json>;
  retrieve(id: string): Promise<Json>;
  update(id: string, body: Json): Promise<Json>;
  attach(id: string, customerId: string): Promise<Json>;
  delete(id: string): Promise<Json>;
  listOf(customerId: string, params?: Json): Promise<Json>;
  createCustomer(): Promise<string>;
  deleteCustomer(id: string): Promise<Json>;
}

function api(apiKey: string): PaymentMethodApi {
  const call = restCaller(service.url, apiKey);
  const at = (id: string) => `/payment_methods/${encodeURIComponent(id)}`;
  return {
    create: (body) => call("POST", "/payment_methods", body),
    retrieve: (id) => call("GET", at(id)),
    update: (id, body) => call("POST", at(id), body),
    attach: (id, customerId) => call("POST", `${at(id)}/attach`, { customer_id: customerId }),
    delete: (id) => call("DELETE", at(id)),
    listOf: (customerId, params = {}) => restList(call, "GET", `/customers/${encodeURIComponent(customerId)}/payment_methods`)(params),
    createCustomer: async () => String((await call("POST", "/customers", {})).customer_id),
    deleteCustomer: (id) => call("DELETE", `/customers/${encodeURIComponent(id)}`),
  };
}

/** A card to save: the 4242 test card with the given expiry and holder. */
function cardBody(fields: Json = {}): Json {
  return { payment_method: "card", card: { card_number: visaCard.card_number, card_exp_month: "12", card_exp_year: "2034", ...fields } };
}

async function merchantApi(): Promise<{
  merchant: TestMerchant;
  secret: PaymentMethodApi;
  publishable: PaymentMethodApi;
  publishableKey: string;
}> {
  const merchant = await newMerchant(service.url);
  const publishableKey = await issueKey(service.url, merchant.merchantId, "sandbox", "publishable");
  return { merchant, secret: api(merchant.apiKey), publishable: api(publishableKey), publishableKey };
}

/** Everything stored about the merchant's payment methods, as text. */
async function storedRows(merchant: TestMerchant): Promise<string> {
  const rows: { row: string }[] = await service.app.dataSource.query(
    "SELECT row_to_json(m)::text AS row FROM payment_methods m WHERE merchant_id = $1",
    [merchant.merchantId],
  );
  return rows.map((r) => r.row).join("\n");
}

describe("saving a card for a customer (secret key)", () => {
  it("answers the masked card with its fingerprint and keeps the number only encrypted, the CVC nowhere", async () => {
    const { merchant, secret } = await merchantApi();
    const customerId = await secret.createCustomer();
    const saved = await secret.create({
      ...cardBody({ card_cvc: "123", card_holder_name: "Jane Doe" }),
      customer_id: customerId,
      billing: { city: "Springfield", country: "US" },
      metadata: { plan: "gold" },
    });
    expect(saved).toMatchObject({
      payment_method_id: expect.stringMatching(/^pm_/),
      merchant_id: merchant.merchantId,
      customer_id: customerId,
      payment_method: "card",
      card: { last4: "4242", brand: "visa", exp_month: "12", exp_year: "2034", card_holder_name: "Jane Doe" },
      billing: { city: "Springfield", country: "US" },
      metadata: { plan: "gold" },
    });
    expect((saved.card as Json).fingerprint).toMatch(/^[A-Za-z0-9_-]{16}$/);
    expect(JSON.stringify(saved)).not.toContain(visaCard.card_number);
    expect(await secret.retrieve(String(saved.payment_method_id))).toEqual(saved);

    const stored = await storedRows(merchant);
    expect(stored).not.toContain(visaCard.card_number);
    expect(stored).not.toContain('"123"');
    expect(stored).toMatch(/"card_ciphertext":"[^"]{20,}"/);
  });

  it("the same card saved twice for one customer is one payment method, its expiry and holder updated", async () => {
    const { secret } = await merchantApi();
    const customerId = await secret.createCustomer();
    const first = await secret.create({ ...cardBody(), customer_id: customerId });
    const again = await secret.create({
      ...cardBody({ card_exp_month: "3", card_exp_year: "2036", card_holder_name: "J Doe" }),
      customer_id: customerId,
    });
    expect(again.payment_method_id).toBe(first.payment_method_id);
    expect(again.card).toMatchObject({ exp_month: "03", exp_year: "2036", card_holder_name: "J Doe" });
    expect(((await secret.listOf(customerId)).data as Json[]).map((m) => m.payment_method_id)).toEqual([first.payment_method_id]);
  });

  it("saved concurrently ten times, one card is still one payment method", async () => {
    const { secret } = await merchantApi();
    const customerId = await secret.createCustomer();
    const saves = await Promise.all(Array.from({ length: 10 }, () => secret.create({ ...cardBody(), customer_id: customerId })));
    expect(new Set(saves.map((s) => s.payment_method_id)).size).toBe(1);
    expect((await secret.listOf(customerId)).total_count).toBe(1);
  });

  it("a fingerprint is the same for one card within a merchant and differs between merchants", async () => {
    const a = await merchantApi();
    const b = await merchantApi();
    const [ofA1, ofA2] = [await a.secret.createCustomer(), await a.secret.createCustomer()];
    const fingerprint = async (pm: Json) => (pm.card as Json).fingerprint;
    const a1 = await fingerprint(await a.secret.create({ ...cardBody(), customer_id: ofA1 }));
    const a2 = await fingerprint(await a.secret.create({ ...cardBody(), customer_id: ofA2 }));
    const other = await fingerprint(await a.secret.create({ ...cardBody({ card_number: "4000000000000002" }), customer_id: ofA1 }));
    const b1 = await fingerprint(await b.secret.create({ ...cardBody(), customer_id: await b.secret.createCustomer() }));
    expect(a2).toBe(a1);
    expect(other).not.toBe(a1);
    expect(b1).not.toBe(a1);
  });

  it("refuses a card the sandbox does not know, an expired card, a missing card or method, and an unknown customer, naming the field", async () => {
    const { secret } = await merchantApi();
    const customerId = await secret.createCustomer();
    await expectError(
      secret.create({ ...cardBody({ card_number: "4012888888881881" }), customer_id: customerId }),
      "IR_05",
      "card.card_number",
    );
    await expectError(secret.create({ ...cardBody({ card_exp_year: "2020" }), customer_id: customerId }), "IR_16", "expired");
    await expectError(secret.create({ payment_method: "card" }), "IR_04", "card");
    await expectError(secret.create({ card: cardBody().card as Json }), "IR_04", "payment_method");
    await expectError(secret.create({ ...cardBody(), payment_method: "wallet" }), "IR_05", "payment_method");
    await expectError(secret.create({ ...cardBody(), customer_id: "cus_nobody" }), "HE_02", "customer_id");
  });
});

describe("client-side tokens (publishable key)", () => {
  it("a publishable key makes an unattached token and nothing else of this API", async () => {
    const { secret, publishable } = await merchantApi();
    const token = await publishable.create(cardBody());
    expect(token.customer_id).toBeNull();
    expect(token.payment_method_id).toMatch(/^pm_/);
    await expectError(publishable.create({ ...cardBody(), customer_id: await secret.createCustomer() }), "IR_22", "attach");
    await expectError(publishable.retrieve(String(token.payment_method_id)), "IR_22");
    await expectError(publishable.delete(String(token.payment_method_id)), "IR_22");
    expect((await secret.retrieve(String(token.payment_method_id))).payment_method_id).toBe(token.payment_method_id);
  });

  it("attaching gives a token its customer; a token already another customer's is refused", async () => {
    const { secret, publishable } = await merchantApi();
    const [one, two] = [await secret.createCustomer(), await secret.createCustomer()];
    const token = await publishable.create(cardBody());
    const attached = await secret.attach(String(token.payment_method_id), one);
    expect({ id: attached.payment_method_id, customer: attached.customer_id }).toEqual({ id: token.payment_method_id, customer: one });
    expect(await secret.attach(String(token.payment_method_id), one)).toEqual(attached);
    await expectError(secret.attach(String(token.payment_method_id), two), "IR_16", "another customer");
    await expectError(secret.attach(String(token.payment_method_id), "cus_nobody"), "HE_02", "customer_id");
  });

  it("attaching a token of a card the customer has already updates that one, and the token is used up", async () => {
    const { secret, publishable } = await merchantApi();
    const customerId = await secret.createCustomer();
    const saved = await secret.create({ ...cardBody(), customer_id: customerId });
    const token = await publishable.create(cardBody({ card_exp_year: "2037" }));
    const attached = await secret.attach(String(token.payment_method_id), customerId);
    expect(attached.payment_method_id).toBe(saved.payment_method_id);
    expect((attached.card as Json).exp_year).toBe("2037");
    await expectError(secret.retrieve(String(token.payment_method_id)), "HE_02");
  });

  it("a token nothing attached is removed 24 hours after it was made; an attached one stays", async () => {
    const { secret, publishable } = await merchantApi();
    const kept = await publishable.create(cardBody());
    const lapsed = await publishable.create(cardBody({ card_exp_month: "11" }));
    await secret.attach(String(kept.payment_method_id), await secret.createCustomer());
    const created = Date.parse(String(lapsed.created));

    const manager = service.app.dataSource.manager;
    await reapExpiredTokens(manager, new Date(created + 24 * 3600_000 - 1000));
    expect((await secret.retrieve(String(lapsed.payment_method_id))).payment_method_id).toBe(lapsed.payment_method_id);
    await reapExpiredTokens(manager, new Date(created + 24 * 3600_000 + 1000));
    await expectError(secret.retrieve(String(lapsed.payment_method_id)), "HE_02");
    expect((await secret.retrieve(String(kept.payment_method_id))).payment_method_id).toBe(kept.payment_method_id);
  });
});

describe("updating, deleting and listing", () => {
  it("updates expiry, holder, billing and metadata; never the number; never to an expired date", async () => {
    const { secret } = await merchantApi();
    const saved = await secret.create({
      ...cardBody({ card_holder_name: "Jane" }),
      customer_id: await secret.createCustomer(),
      metadata: { a: "1" },
    });
    const id = String(saved.payment_method_id);
    const updated = await secret.update(id, {
      card_exp_month: "7",
      card_holder_name: "",
      billing: { city: "Shelbyville" },
      metadata: { a: "", b: "2" },
    });
    expect(updated.card).toMatchObject({ exp_month: "07", exp_year: "2034" });
    expect((updated.card as Json).card_holder_name).toBeNull();
    expect(updated.billing).toMatchObject({ city: "Shelbyville", country: null });
    expect(updated.metadata).toEqual({ b: "2" });
    await expectError(secret.update(id, { card_number: "4000000000000002" }), "IR_06", "card_number");
    await expectError(secret.update(id, { card_exp_year: "2021" }), "IR_16", "expired");
    await expectError(secret.update(id, { card_exp_month: "13" }), "IR_05", "card_exp_month");
    expect((await secret.retrieve(id)).card).toEqual(updated.card);
  });

  it("a deleted payment method is gone: retrieve, update, attach and delete are 404, the list leaves it out, its number is dropped", async () => {
    const { merchant, secret } = await merchantApi();
    const customerId = await secret.createCustomer();
    const saved = await secret.create({ ...cardBody(), customer_id: customerId });
    const id = String(saved.payment_method_id);
    expect(await secret.delete(id)).toEqual({ payment_method_id: id, deleted: true });
    await expectError(secret.retrieve(id), "HE_02", id);
    await expectError(secret.update(id, { metadata: { a: "b" } }), "HE_02");
    await expectError(secret.attach(id, customerId), "HE_02");
    await expectError(secret.delete(id), "HE_02");
    expect((await secret.listOf(customerId)).total_count).toBe(0);
    expect(await storedRows(merchant)).toContain('"card_ciphertext":null');
    // Saved again, the card is a new payment method.
    expect((await secret.create({ ...cardBody(), customer_id: customerId })).payment_method_id).not.toBe(id);
  });

  it("deleting a customer deletes its payment methods", async () => {
    const { secret } = await merchantApi();
    const customerId = await secret.createCustomer();
    const saved = await secret.create({ ...cardBody(), customer_id: customerId });
    await secret.deleteCustomer(customerId);
    await expectError(secret.retrieve(String(saved.payment_method_id)), "HE_02");
  });

  it("lists a customer's payment methods newest first, a page at a time; an unknown customer is 404 naming customer_id", async () => {
    const { secret } = await merchantApi();
    const customerId = await secret.createCustomer();
    const numbers = ["4242424242424242", "4000000000000002", "4000000000009995"];
    const saved: Json[] = [];
    for (const card_number of numbers) saved.push(await secret.create({ ...cardBody({ card_number }), customer_id: customerId }));
    await secret.create({ ...cardBody(), customer_id: await secret.createCustomer() });
    const page = await secret.listOf(customerId, { limit: 2 });
    expect(page.total_count).toBe(3);
    expect(page.has_more).toBe(true);
    const all = (await secret.listOf(customerId)).data as Json[];
    expect(all.map((m) => m.payment_method_id)).toEqual(
      [...saved]
        .sort(
          (x, y) =>
            String(y.created).localeCompare(String(x.created)) || String(y.payment_method_id).localeCompare(String(x.payment_method_id)),
        )
        .map((m) => m.payment_method_id),
    );
    await expectError(secret.listOf("cus_nobody"), "HE_02", "customer_id");
  });

  it("another merchant's payment method, or the other environment's, is 404", async () => {
    const a = await merchantApi();
    const b = await merchantApi();
    const saved = await a.secret.create({ ...cardBody(), customer_id: await a.secret.createCustomer() });
    const id = String(saved.payment_method_id);
    await expectError(b.secret.retrieve(id), "HE_02");
    await expectError(b.secret.delete(id), "HE_02");
    const production = api(await issueKey(service.url, a.merchant.merchantId, "production", "secret"));
    await expectError(production.retrieve(id), "HE_02");
  });
});

describe("paying with a saved payment method", () => {
  /** A payment of the merchant, created with its secret key, confirmed at once unless `fields` say otherwise. */
  async function pay(merchant: TestMerchant, fields: Json): Promise<Json> {
    return restCaller(service.url, merchant.apiKey)("POST", "/payments", {
      amount: 1000,
      currency: "USD",
      profile_id: merchant.profileId,
      confirm: true,
      ...fields,
    });
  }

  it("a customer's card pays for the customer's payments, which show it; a payment without a customer takes its customer", async () => {
    const { merchant, secret } = await merchantApi();
    const customerId = await secret.createCustomer();
    const saved = await secret.create({ ...cardBody(), customer_id: customerId });
    const id = String(saved.payment_method_id);
    const first = await pay(merchant, { payment_method_id: id, customer_id: customerId });
    expect(first).toMatchObject({ status: "succeeded", payment_method_id: id, customer_id: customerId, payment_method: "card" });
    expect((first.payment_method_data as Json).card).toMatchObject({ last4: "4242", brand: "visa", exp_month: "12", exp_year: "2034" });
    const second = await pay(merchant, { payment_method_id: id, capture_method: "manual" });
    expect(second).toMatchObject({ status: "requires_capture", payment_method_id: id, customer_id: customerId });
  });

  it("a declining saved card fails the payment as the card would", async () => {
    const { merchant, secret } = await merchantApi();
    const saved = await secret.create({ ...cardBody({ card_number: "4000000000000002" }), customer_id: await secret.createCustomer() });
    const payment = await pay(merchant, { payment_method_id: String(saved.payment_method_id) });
    expect(payment).toMatchObject({ status: "failed", error_code: "card_declined" });
  });

  it("a token pays for one payment, confirmed in the browser with the publishable key; a second payment is refused", async () => {
    const { merchant, publishable, publishableKey } = await merchantApi();
    const token = await publishable.create(cardBody());
    const id = String(token.payment_method_id);
    const checkout = await pay(merchant, { confirm: false });
    const confirm = (payment: Json, body: Json) =>
      restCaller(service.url, publishableKey)("POST", `/payments/${String(payment.payment_id)}/confirm`, body);
    const confirmed = await confirm(checkout, { client_secret: String(checkout.client_secret), payment_method_id: id });
    expect(confirmed).toMatchObject({ status: "succeeded", payment_method_id: id });
    const another = await pay(merchant, { confirm: false });
    await expectError(
      confirm(another, { client_secret: String(another.client_secret), payment_method_id: id }),
      "IR_16",
      "another payment",
    );
    await expectError(pay(merchant, { payment_method_id: id }), "IR_16", "another payment");
  });

  it("refuses another customer's card, a deleted one, an unknown one, both a card and a saved one, and a saved one without confirm", async () => {
    const { merchant, secret } = await merchantApi();
    const [owner, other] = [await secret.createCustomer(), await secret.createCustomer()];
    const saved = await secret.create({ ...cardBody(), customer_id: owner });
    const id = String(saved.payment_method_id);
    await expectError(pay(merchant, { payment_method_id: id, customer_id: other }), "IR_05", "payment_method_id");
    await expectError(pay(merchant, { payment_method_id: id, payment_method_data: { card: visaCard } }), "IR_06", "payment_method_id");
    await expectError(pay(merchant, { payment_method_id: id, confirm: false }), "IR_05", "payment_method_id");
    await expectError(pay(merchant, { payment_method_id: "pm_nobody" }), "HE_02", "payment_method_id");
    const otherMerchant = await merchantApi();
    await expectError(pay(otherMerchant.merchant, { payment_method_id: id }), "HE_02", "payment_method_id");
    await secret.delete(id);
    await expectError(pay(merchant, { payment_method_id: id }), "IR_16", "deleted");
  });
});

describe("a saved card past its expiry on the service's clock", () => {
  const clock = new TestClock();
  const clocked = runningService({}, clock);

  it("still pays before its month ends, and fails the payment with expired_card after", async () => {
    const merchant = await newMerchant(clocked.url);
    const call = restCaller(clocked.url, merchant.apiKey);
    const now = clock.now();
    const customer = await call("POST", "/customers", {});
    const saved = await call("POST", "/payment_methods", {
      payment_method: "card",
      customer_id: String(customer.customer_id),
      card: {
        card_number: visaCard.card_number,
        card_exp_month: String(now.getUTCMonth() + 1),
        card_exp_year: String(now.getUTCFullYear()),
      },
    });
    const pay = () =>
      call("POST", "/payments", {
        amount: 500,
        currency: "USD",
        profile_id: merchant.profileId,
        confirm: true,
        payment_method_id: String(saved.payment_method_id),
      });
    expect(await pay()).toMatchObject({ status: "succeeded" });
    clock.advance(40 * 24 * 3600_000);
    expect(await pay()).toMatchObject({ status: "failed", error_code: "expired_card", payment_method_id: saved.payment_method_id });
  });
});
