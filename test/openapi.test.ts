import { readFileSync } from "node:fs";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rest, type JsonBody, type RestResponse } from "./support/clients.js";
import { visaCard } from "./support/cards.js";
import { isoUtc } from "./support/formats.js";
import { newMerchant, updateProfile, type TestMerchant } from "./support/merchant.js";
import { payoutBodies, payoutCards } from "./support/payout-destinations.js";
import { runningService } from "./support/running.js";
import { noPolling } from "./support/service.js";

/*
 * The OpenAPI document (gen/openapi.json, generated from the protos) describes what the service
 * really answers: every REST operation it lists is called over a real port, at least once
 * successfully and once with an error, and each answer's body is checked against the document's
 * schema for that path, method and status, and its rate-limit headers against the ones it declares.
 */

const service = runningService({ ...noPolling, SANDBOX_TEST_CLOCK: "true" });

// biome-ignore lint/suspicious/noExplicitAny: the document is JSON whose shape this test walks
type Document = any;

const document: Document = JSON.parse(readFileSync(new URL("../gen/openapi.json", import.meta.url), "utf8"));

const ajv = new Ajv2020({
  allErrors: true,
  allowUnionTypes: true,
  // date-time as the REST dialect writes it; int32/int64 are OpenAPI's notes on integers, which the schema bounds anyway.
  formats: { "date-time": isoUtc, int32: true, int64: true },
});
// The components are given to ajv as a schema of their own, which each response's schema refers to.
ajv.addSchema({ $id: "components", $defs: retarget(document.components.schemas) });

/** The document's `#/components/schemas/X` references, pointed at the schema ajv holds. */
function retarget(schema: unknown): unknown {
  return JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', '"components#/$defs/'));
}

function resolve(object: Document): Document {
  const ref: string | undefined = object?.$ref;
  if (ref === undefined) return object;
  return ref
    .slice(2)
    .split("/")
    .reduce((node: Document, part) => node[part.replaceAll("~1", "/").replaceAll("~0", "~")], document);
}

const validators = new Map<string, ValidateFunction>();

/** What was checked, `METHOD template` → the statuses seen. */
const checked = new Map<string, Set<number>>();

/** Who calls: a merchant's key, the operator's admin key, or nobody. */
type Caller = TestMerchant | "admin" | "anonymous";

/**
 * Calls one operation of the document (the template filled with `ids`) and checks the answer
 * against the document: the status is one it lists, the body fits that status's schema, and an
 * answer to a merchant key carries the rate-limit headers it declares.
 */
async function call(
  caller: Caller,
  httpMethod: string,
  template: string,
  ids: Record<string, string> = {},
  options: { body?: unknown; query?: string } = {},
): Promise<RestResponse> {
  const operation = document.paths[template]?.[httpMethod.toLowerCase()];
  expect(operation, `${httpMethod} ${template} is in the document`).toBeDefined();
  const path = template.replace(/\{([a-z_]+)\}/g, (_, name: string) => encodeURIComponent(ids[name] ?? "missing")) + (options.query ?? "");
  const res = await rest(service.url, httpMethod, path, {
    body: options.body,
    ...(caller === "admin" ? { admin: true } : caller === "anonymous" ? {} : { apiKey: caller.apiKey }),
  });
  const key = `${httpMethod} ${template}`;
  const declared = operation.responses[String(res.status)];
  expect(declared, `${key} answered ${res.status}, which the document lists: ${res.text}`).toBeDefined();
  const response = resolve(declared);
  const id = `${key} ${res.status}`;
  let validate = validators.get(id);
  if (validate === undefined) {
    validate = ajv.compile(retarget(response.content["application/json"].schema) as object);
    validators.set(id, validate);
  }
  expect(validate(res.body) ? [] : validate.errors, `${id}: ${res.text}`).toEqual([]);
  const merchantKeyWorks = operation.security.some((scheme: object) => "apiKey" in scheme);
  if (typeof caller === "object" && merchantKeyWorks) {
    for (const header of Object.keys(response.headers ?? {}).filter((name) => name.startsWith("X-RateLimit"))) {
      expect(res.headers.get(header), `${id} carries ${header}`).toMatch(/^\d+$/);
    }
  }
  checked.set(key, (checked.get(key) ?? new Set()).add(res.status));
  return res;
}

/** Calls an operation that must succeed, and returns its body. */
async function ok(caller: Caller, httpMethod: string, template: string, ids?: Record<string, string>, body?: unknown): Promise<JsonBody> {
  const res = await call(caller, httpMethod, template, ids, { body });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

/** Calls an operation that must fail with `status`. */
async function fails(
  status: number,
  caller: Caller,
  httpMethod: string,
  template: string,
  ids?: Record<string, string>,
  options?: { body?: unknown; query?: string },
): Promise<void> {
  const res = await call(caller, httpMethod, template, ids, options);
  expect(res.status, res.text).toBe(status);
}

describe("GET /openapi.json", () => {
  it("serves the generated document without an API key", async () => {
    const res = await fetch(`${service.url}/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toEqual(document);
  });

  it("answers another method with 405 and a path beside it with 404, in the documented error shape", async () => {
    const post = await rest(service.url, "POST", "/openapi.json", { body: {} });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
    expect(post.body.error.code).toBe("IR_03");
    const beside = await rest(service.url, "GET", "/openapi.jsonx");
    expect(beside.status).toBe(404);
    expect(beside.body.error.code).toBe("IR_02");
  });
});

describe("the document's schemas", () => {
  it("refuse an answer outside the REST dialect: an amount as a string, a camelCase key, an enum's proto name", () => {
    const schema = retarget(resolve(document.paths["/payments/{payment_id}"].get.responses["200"]).content["application/json"].schema);
    const validate = ajv.compile(schema as object);
    const payment = Object.fromEntries(Object.keys(document.components.schemas.Payment.properties).map((name) => [name, null]));
    const valid = {
      ...payment,
      payment_id: "pay_1",
      merchant_id: "mer_1",
      profile_id: "pro_1",
      amount: 5,
      amount_capturable: 0,
      currency: "USD",
      metadata: {},
      off_session: false,
    };
    expect(validate(valid), JSON.stringify(validate.errors)).toBe(true);
    expect(validate({ ...valid, amount: "5" })).toBe(false);
    expect(validate({ ...valid, paymentId: "pay_1" })).toBe(false);
    expect(validate({ ...valid, status: "PAYMENT_STATUS_SUCCEEDED" })).toBe(false);
  });
});

describe("every REST operation answers as the document says", () => {
  let merchant: TestMerchant;
  const unknown = { payment_id: "pay_unknown", refund_id: "ref_unknown", dispute_id: "dis_unknown", payout_id: "po_unknown" };

  beforeAll(async () => {
    merchant = await newMerchant(service.url);
  });

  it("merchants and profiles (admin)", async () => {
    const created = await ok("admin", "POST", "/merchants", {}, { merchant_name: "OpenAPI merchant" });
    await fails(401, "anonymous", "POST", "/merchants", {}, { body: { merchant_name: "x" } });
    const ids = { merchant_id: created.merchant_id, profile_id: created.default_profile_id };
    await ok("admin", "GET", "/merchants/{merchant_id}", ids);
    await fails(404, "admin", "GET", "/merchants/{merchant_id}", { merchant_id: "mer_unknown" });
    const profile = await ok("admin", "POST", "/merchants/{merchant_id}/profiles", ids, { profile_name: "web" });
    await fails(400, "admin", "POST", "/merchants/{merchant_id}/profiles", ids, { body: { profile_name: 5 } });
    await ok("admin", "GET", "/merchants/{merchant_id}/profiles/{profile_id}", { ...ids, profile_id: profile.profile_id });
    await fails(404, "admin", "GET", "/merchants/{merchant_id}/profiles/{profile_id}", { ...ids, profile_id: "pro_unknown" });
    await ok("admin", "POST", "/merchants/{merchant_id}/profiles/{profile_id}", ids, { return_url: "https://shop.example/done" });
    await fails(400, "admin", "POST", "/merchants/{merchant_id}/profiles/{profile_id}", ids, { body: { nope: 1 } });
  });

  it("API keys and health", async () => {
    const issued = await ok("admin", "POST", "/api-keys", {}, { merchant_id: merchant.merchantId, environment: "sandbox" });
    await fails(400, "admin", "POST", "/api-keys", {}, { body: { merchant_id: merchant.merchantId, kind: "nope" } });
    await ok(merchant, "GET", "/api-keys");
    await fails(400, merchant, "GET", "/api-keys", {}, { query: "?nope=1" });
    await ok(merchant, "GET", "/api-keys/{key_id}", { key_id: issued.key_id });
    await fails(404, merchant, "GET", "/api-keys/{key_id}", { key_id: "key_unknown" });
    await ok(merchant, "DELETE", "/api-keys/{key_id}/revoke", { key_id: issued.key_id });
    await fails(404, merchant, "DELETE", "/api-keys/{key_id}/revoke", { key_id: "key_unknown" });
    await ok(merchant, "GET", "/health");
    await fails(401, "anonymous", "GET", "/health");
  });

  it("customers", async () => {
    const customer = await ok(merchant, "POST", "/customers", {}, { email: "jane@example.com", address: { country: "GB" } });
    await fails(400, merchant, "POST", "/customers", {}, { body: { email: "not an email" } });
    const ids = { customer_id: customer.customer_id };
    await ok(merchant, "POST", "/customers/{customer_id}", ids, { name: "Jane", metadata: { tier: "gold" } });
    await fails(404, merchant, "POST", "/customers/{customer_id}", { customer_id: "cus_unknown" }, { body: { name: "x" } });
    await ok(merchant, "GET", "/customers/{customer_id}", ids);
    await fails(404, merchant, "GET", "/customers/{customer_id}", { customer_id: "cus_unknown" });
    expect((await ok(merchant, "GET", "/customers/list")).total_count).toBe(1);
    await fails(400, merchant, "GET", "/customers/list", {}, { query: "?limit=0" });
    await ok(merchant, "POST", "/customers/list", {}, { limit: 5 });
    await fails(400, merchant, "POST", "/customers/list", {}, { body: { limit: 101 } });
    await ok(merchant, "DELETE", "/customers/{customer_id}", ids);
    await fails(404, merchant, "DELETE", "/customers/{customer_id}", ids);
  });

  it("payments, refunds and disputes", async () => {
    const card = { card: visaCard };
    const paid = await ok(
      merchant,
      "POST",
      "/payments",
      {},
      {
        amount: 1000,
        currency: "USD",
        profile_id: merchant.profileId,
        confirm: true,
        payment_method: "card",
        payment_method_data: card,
      },
    );
    expect(paid.status).toBe("succeeded");
    await fails(400, merchant, "POST", "/payments", {}, { body: { amount: "1000", currency: "USD" } });

    const draft = await ok(
      merchant,
      "POST",
      "/payments",
      {},
      { amount: 2500, currency: "EUR", profile_id: merchant.profileId, capture_method: "manual" },
    );
    await ok(merchant, "POST", "/payments/{payment_id}", { payment_id: draft.payment_id }, { description: "Order 42" });
    await fails(404, merchant, "POST", "/payments/{payment_id}", unknown, { body: { description: "x" } });
    const authorized = await ok(
      merchant,
      "POST",
      "/payments/{payment_id}/confirm",
      { payment_id: draft.payment_id },
      { payment_method_data: card },
    );
    expect(authorized.status).toBe("requires_capture");
    await fails(404, merchant, "POST", "/payments/{payment_id}/confirm", unknown, { body: { payment_method_data: card } });
    await ok(merchant, "POST", "/payments/{payment_id}/capture", { payment_id: draft.payment_id }, { amount_to_capture: 2000 });
    await fails(404, merchant, "POST", "/payments/{payment_id}/capture", unknown, { body: {} });
    const toCancel = await ok(merchant, "POST", "/payments", {}, { amount: 300, currency: "USD", profile_id: merchant.profileId });
    await ok(merchant, "POST", "/payments/{payment_id}/cancel", { payment_id: toCancel.payment_id }, { cancellation_reason: "duplicate" });
    await fails(400, merchant, "POST", "/payments/{payment_id}/cancel", { payment_id: toCancel.payment_id }, { body: {} });
    await ok(merchant, "GET", "/payments/{payment_id}", { payment_id: paid.payment_id });
    await fails(404, merchant, "GET", "/payments/{payment_id}", unknown);
    await ok(merchant, "GET", "/payments/list");
    await fails(400, merchant, "GET", "/payments/list", {}, { query: "?status=nope" });
    await ok(merchant, "POST", "/payments/list", {}, { currency: "USD" });
    await fails(400, merchant, "POST", "/payments/list", {}, { body: { nope: 1 } });

    const refund = await ok(merchant, "POST", "/refunds", {}, { payment_id: draft.payment_id, amount: 100, reason: "duplicate" });
    await fails(400, merchant, "POST", "/refunds", {}, { body: { payment_id: draft.payment_id, amount: -1 } });
    await ok(merchant, "POST", "/refunds/{refund_id}", { refund_id: refund.refund_id }, { metadata: { ticket: "7" } });
    await fails(404, merchant, "POST", "/refunds/{refund_id}", unknown, { body: {} });
    await ok(merchant, "GET", "/refunds/{refund_id}", { refund_id: refund.refund_id });
    await fails(404, merchant, "GET", "/refunds/{refund_id}", unknown);
    const scheduled = await ok(merchant, "POST", "/refunds", {}, { payment_id: draft.payment_id, amount: 100, refund_type: "scheduled" });
    await ok(merchant, "POST", "/refunds/{refund_id}/cancel", { refund_id: scheduled.refund_id });
    await fails(404, merchant, "POST", "/refunds/{refund_id}/cancel", unknown);
    await ok(merchant, "GET", "/refunds/list");
    await fails(400, merchant, "GET", "/refunds/list", {}, { query: "?offset=-1" });
    await ok(merchant, "POST", "/refunds/list", {}, { payment_id: draft.payment_id });
    await fails(400, merchant, "POST", "/refunds/list", {}, { body: { limit: "ten" } });

    const dispute = await ok(merchant, "POST", "/sandbox/payments/{payment_id}/dispute", { payment_id: paid.payment_id });
    await fails(404, merchant, "POST", "/sandbox/payments/{payment_id}/dispute", unknown);
    const ids = { dispute_id: dispute.dispute_id };
    await ok(merchant, "GET", "/disputes/{dispute_id}", ids);
    await fails(404, merchant, "GET", "/disputes/{dispute_id}", unknown);
    await ok(merchant, "POST", "/disputes/{dispute_id}/evidence", ids, { evidence: { receipt: "Receipt #42" } });
    await fails(404, merchant, "POST", "/disputes/{dispute_id}/evidence", unknown, { body: { evidence: { receipt: "r" } } });
    await ok(merchant, "POST", "/sandbox/disputes/{dispute_id}/resolve", ids, { outcome: "won" });
    await fails(404, merchant, "POST", "/sandbox/disputes/{dispute_id}/resolve", unknown, { body: { outcome: "won" } });
    const second = await ok(
      merchant,
      "POST",
      "/payments",
      {},
      {
        amount: 700,
        currency: "USD",
        profile_id: merchant.profileId,
        confirm: true,
        payment_method: "card",
        payment_method_data: card,
      },
    );
    const accepted = await ok(merchant, "POST", "/sandbox/payments/{payment_id}/dispute", { payment_id: second.payment_id });
    await ok(merchant, "POST", "/disputes/{dispute_id}/accept", { dispute_id: accepted.dispute_id });
    await fails(404, merchant, "POST", "/disputes/{dispute_id}/accept", unknown);
    await ok(merchant, "GET", "/disputes/list");
    await fails(400, merchant, "GET", "/disputes/list", {}, { query: "?limit=1000" });
    await ok(merchant, "POST", "/disputes/list", {}, { status: "won" });
    await fails(400, merchant, "POST", "/disputes/list", {}, { body: { status: "nope" } });
  });

  it("payouts", async () => {
    const bodies = payoutBodies(() => new Date());
    const held = await ok(merchant, "POST", "/payouts/create", {}, bodies.cardPayout(merchant, payoutCards.succeeds, { confirm: false }));
    await fails(400, merchant, "POST", "/payouts/create", {}, { body: { nope: 1 } });
    const ids = { payout_id: held.payout_id };
    await ok(merchant, "POST", "/payouts/{payout_id}", ids, { metadata: { batch: "7" } });
    await fails(404, merchant, "POST", "/payouts/{payout_id}", unknown, { body: {} });
    await ok(merchant, "GET", "/payouts/{payout_id}", ids);
    await fails(404, merchant, "GET", "/payouts/{payout_id}", unknown);
    await ok(merchant, "POST", "/payouts/{payout_id}/fulfill", ids);
    await fails(404, merchant, "POST", "/payouts/{payout_id}/fulfill", unknown);
    const other = await ok(merchant, "POST", "/payouts/create", {}, bodies.cardPayout(merchant, payoutCards.succeeds, { confirm: false }));
    await ok(merchant, "POST", "/payouts/{payout_id}/cancel", { payout_id: other.payout_id });
    await fails(404, merchant, "POST", "/payouts/{payout_id}/cancel", unknown);
    await ok(merchant, "GET", "/payouts/list");
    await fails(400, merchant, "GET", "/payouts/list", {}, { query: "?payout_type=nope" });
    await ok(merchant, "POST", "/payouts/list", {}, { payout_type: "card" });
    await fails(400, merchant, "POST", "/payouts/list", {}, { body: { limit: 0 } });
  });

  it("payment methods", async () => {
    const customerId = (await ok(merchant, "POST", "/customers", {}, {})).customer_id;
    const saved = await ok(merchant, "POST", "/payment_methods", {}, { payment_method: "card", card: visaCard, customer_id: customerId });
    await fails(400, merchant, "POST", "/payment_methods", {}, { body: { nope: 1 } });
    const ids = { payment_method_id: saved.payment_method_id };
    const unknownMethod = { payment_method_id: "pm_unknown" };
    await ok(merchant, "GET", "/payment_methods/{payment_method_id}", ids);
    await fails(404, merchant, "GET", "/payment_methods/{payment_method_id}", unknownMethod);
    await ok(merchant, "POST", "/payment_methods/{payment_method_id}", ids, { metadata: { plan: "gold" } });
    await fails(404, merchant, "POST", "/payment_methods/{payment_method_id}", unknownMethod, { body: {} });
    const token = await ok(
      merchant,
      "POST",
      "/payment_methods",
      {},
      { payment_method: "card", card: { ...visaCard, card_exp_year: "2036" } },
    );
    await ok(
      merchant,
      "POST",
      "/payment_methods/{payment_method_id}/attach",
      { payment_method_id: token.payment_method_id },
      { customer_id: customerId },
    );
    await fails(404, merchant, "POST", "/payment_methods/{payment_method_id}/attach", unknownMethod, { body: { customer_id: customerId } });
    const customerIds = { customer_id: customerId };
    await ok(merchant, "GET", "/customers/{customer_id}/payment_methods", customerIds);
    await fails(404, merchant, "GET", "/customers/{customer_id}/payment_methods", { customer_id: "cus_unknown" });
    await ok(merchant, "POST", "/customers/{customer_id}/payment_methods", customerIds, { limit: 5 });
    await fails(400, merchant, "POST", "/customers/{customer_id}/payment_methods", customerIds, { body: { limit: 0 } });
    await ok(merchant, "DELETE", "/payment_methods/{payment_method_id}", ids);
    await fails(404, merchant, "DELETE", "/payment_methods/{payment_method_id}", ids);
  });

  it("mandates", async () => {
    const customerId = (await ok(merchant, "POST", "/customers", {}, {})).customer_id;
    const setup = await ok(
      merchant,
      "POST",
      "/payments",
      {},
      {
        amount: 0,
        currency: "USD",
        profile_id: merchant.profileId,
        confirm: true,
        customer_id: customerId,
        setup_future_usage: "off_session",
        customer_acceptance: { acceptance_type: "offline" },
        payment_method_data: { card: visaCard },
      },
    );
    const ids = { mandate_id: setup.mandate_id };
    const unknownMandate = { mandate_id: "man_unknown" };
    await ok(merchant, "GET", "/mandates/{mandate_id}", ids);
    await fails(404, merchant, "GET", "/mandates/{mandate_id}", unknownMandate);
    const customerIds = { customer_id: customerId };
    await ok(merchant, "GET", "/customers/{customer_id}/mandates", customerIds);
    await fails(404, merchant, "GET", "/customers/{customer_id}/mandates", { customer_id: "cus_unknown" });
    await ok(merchant, "POST", "/customers/{customer_id}/mandates", customerIds, { limit: 5 });
    await fails(400, merchant, "POST", "/customers/{customer_id}/mandates", customerIds, { body: { limit: 0 } });
    await ok(merchant, "POST", "/mandates/{mandate_id}/revoke", ids, {});
    await fails(404, merchant, "POST", "/mandates/{mandate_id}/revoke", unknownMandate, { body: {} });
  });

  it("balances and the ledger", async () => {
    await ok(merchant, "GET", "/balance");
    await fails(400, merchant, "GET", "/balance", {}, { query: "?nope=1" });
    const listed = await ok(merchant, "GET", "/balance_transactions/list");
    expect(listed.data.length).toBeGreaterThan(0);
    await fails(400, merchant, "GET", "/balance_transactions/list", {}, { query: "?type=nope" });
    await ok(merchant, "POST", "/balance_transactions/list", {}, { type: "payment", status: "pending" });
    await fails(400, merchant, "POST", "/balance_transactions/list", {}, { body: { currency: "dollars" } });
    const ids = { balance_transaction_id: listed.data[0].balance_transaction_id };
    await ok(merchant, "GET", "/balance_transactions/{balance_transaction_id}", ids);
    await fails(404, merchant, "GET", "/balance_transactions/{balance_transaction_id}", { balance_transaction_id: "txn_unknown" });
    const report = await call(merchant, "GET", "/reports/balance", {}, { query: "?from=2026-11-01T00:00:00Z&to=2026-12-01T00:00:00Z" });
    expect(report.status, report.text).toBe(200);
    await fails(400, merchant, "GET", "/reports/balance", {}, { query: "?from=2026-11-01T00:00:00Z" });
  });

  it("events and the sandbox clock", async () => {
    const listed = await ok(merchant, "GET", "/events/list");
    expect(listed.data.length).toBeGreaterThan(0);
    await fails(400, merchant, "GET", "/events/list", {}, { query: "?nope=1" });
    await ok(merchant, "POST", "/events/list", {}, { type: "payment.succeeded" });
    await fails(400, merchant, "POST", "/events/list", {}, { body: { nope: 1 } });
    const ids = { event_id: listed.data[0].event_id };
    // A redelivery needs somewhere to deliver to; nothing listens there, which the answer does not wait for.
    await updateProfile(service.url, merchant, { webhook_url: "http://127.0.0.1:9/hooks" });
    await ok(merchant, "GET", "/events/{event_id}", ids);
    await fails(404, merchant, "GET", "/events/{event_id}", { event_id: "evt_unknown" });
    await ok(merchant, "POST", "/events/{event_id}/redeliver", ids);
    await fails(404, merchant, "POST", "/events/{event_id}/redeliver", { event_id: "evt_unknown" });
    await ok("admin", "POST", "/sandbox/clock/advance", {}, { seconds: 1 });
    await fails(401, merchant, "POST", "/sandbox/clock/advance", {}, { body: { seconds: 1 } });
  });

  it("jobs (admin)", async () => {
    // A job that failed its last allowed attempt, as the runner leaves it, of a kind no handler knows.
    const [inserted] = (await service.app.dataSource.query(
      `INSERT INTO jobs (kind, merchant_id, livemode, object_id, run_at, attempts, last_error, created, status)
       VALUES ('openapi.retired', $1, false, 'obj_openapi', now(), 20, 'Error: no handler', now(), 'dead') RETURNING job_id::text`,
      [merchant.merchantId],
    )) as { job_id: string }[];
    const deadJob = inserted!.job_id;
    const listed = await ok("admin", "GET", "/jobs/list", {}, undefined);
    expect(listed.data.map((job: JsonBody) => job.job_id)).toContain(deadJob);
    await fails(400, "admin", "GET", "/jobs/list", {}, { query: "?nope=1" });
    await fails(401, merchant, "GET", "/jobs/list");
    await ok("admin", "POST", "/jobs/list", {}, { status: "dead", kind: "openapi.retired" });
    await fails(400, "admin", "POST", "/jobs/list", {}, { body: { status: "buried" } });
    await ok("admin", "POST", "/jobs/{job_id}/retry", { job_id: deadJob });
    await fails(400, "admin", "POST", "/jobs/{job_id}/retry", { job_id: deadJob });
    await fails(404, "admin", "POST", "/jobs/{job_id}/retry", { job_id: "999999999999" });
  });

  afterAll(() => {
    // Run last in the file, so a missed operation is named even when a scenario above failed early.
    const operations = Object.entries(document.paths).flatMap(([template, methods]) =>
      Object.keys(methods as object).map((method) => `${method.toUpperCase()} ${template}`),
    );
    const missing = operations.filter((op) => {
      const statuses = [...(checked.get(op) ?? [])];
      return !statuses.some((s) => s < 300) || !statuses.some((s) => s >= 400);
    });
    expect(missing).toEqual([]);
  });
});

/**
 * Every request example of the document (docs/openapi.md, "Examples"), sent as written: only the ids
 * it names (`*_id` keys and path variables) are replaced, by objects this merchant has, made in the
 * state the operation needs. An operation with an example and no row here fails the test, so a new
 * example is sent as soon as it exists.
 */
describe("every request example of the document", () => {
  let merchant: TestMerchant;
  beforeAll(async () => {
    merchant = await newMerchant(service.url);
  });

  const card = { card: visaCard };
  const payment = async (fields: JsonBody = {}) =>
    ok(merchant, "POST", "/payments", {}, { amount: 5000, currency: "USD", profile_id: merchant.profileId, ...fields });
  const paid = () => payment({ confirm: true, payment_method: "card", payment_method_data: card });
  const dispute = async () => ({
    dispute_id: (await ok(merchant, "POST", "/sandbox/payments/{payment_id}/dispute", await paid())).dispute_id,
  });
  const challenged = async () => {
    const ids = await dispute();
    await ok(merchant, "POST", "/disputes/{dispute_id}/evidence", ids, { evidence: { receipt: "Receipt #42" } });
    return ids;
  };
  const customer = async () => ({ customer_id: (await ok(merchant, "POST", "/customers", {}, {})).customer_id });
  const ownIds = async () => ({ profile_id: merchant.profileId, ...(await customer()) });
  const paymentMethod = async (fields: JsonBody = {}) => ({
    payment_method_id: (await ok(merchant, "POST", "/payment_methods", {}, { payment_method: "card", ...card, ...fields }))
      .payment_method_id,
  });

  /** Who sends each operation's example, and the ids it needs (path variables and `*_id` keys of the body). */
  const rows: Record<string, { caller: "merchant" | "admin"; ids: () => Promise<Record<string, string>> }> = {
    CreateApiKey: { caller: "admin", ids: async () => ({ merchant_id: merchant.merchantId }) },
    CreateCustomer: { caller: "merchant", ids: async () => ({}) },
    UpdateCustomer: { caller: "merchant", ids: customer },
    SubmitDisputeEvidence: { caller: "merchant", ids: dispute },
    CreateMerchant: { caller: "admin", ids: async () => ({}) },
    CreateProfile: { caller: "admin", ids: async () => ({ merchant_id: merchant.merchantId }) },
    UpdateProfile: { caller: "admin", ids: async () => ({ merchant_id: merchant.merchantId, profile_id: merchant.profileId }) },
    CreatePayment: { caller: "merchant", ids: ownIds },
    UpdatePayment: { caller: "merchant", ids: async () => ({ payment_id: (await payment()).payment_id }) },
    CancelPayment: { caller: "merchant", ids: async () => ({ payment_id: (await payment()).payment_id }) },
    ConfirmPayment: { caller: "merchant", ids: async () => ({ payment_id: (await payment()).payment_id }) },
    CreatePayout: { caller: "merchant", ids: ownIds },
    CreateRefund: { caller: "merchant", ids: async () => ({ payment_id: (await paid()).payment_id }) },
    UpdateRefund: {
      caller: "merchant",
      ids: async () => ({ refund_id: (await ok(merchant, "POST", "/refunds", {}, { payment_id: (await paid()).payment_id })).refund_id }),
    },
    ResolveDispute: { caller: "merchant", ids: challenged },
    CreatePaymentMethod: { caller: "merchant", ids: customer },
    UpdatePaymentMethod: { caller: "merchant", ids: async () => paymentMethod({ customer_id: (await customer()).customer_id }) },
    AttachPaymentMethod: { caller: "merchant", ids: async () => ({ ...(await paymentMethod()), ...(await customer()) }) },
    ListCustomerPaymentMethodsPost: { caller: "merchant", ids: customer },
    ListCustomerMandatesPost: { caller: "merchant", ids: customer },
    AdvanceClock: { caller: "admin", ids: async () => ({}) },
    ...Object.fromEntries(
      ["BalanceTransactions", "Customers", "Disputes", "Events", "Payments", "Payouts", "Refunds"].map((list) => [
        `List${list}Post`,
        { caller: "merchant" as const, ids: async () => ({}) },
      ]),
    ),
    ListJobsPost: { caller: "admin", ids: async () => ({}) },
  };

  /** `example` with each `*_id` key, at any depth, set to the id of that name. */
  function withIds(example: unknown, ids: Record<string, string>): unknown {
    if (Array.isArray(example)) return example.map((item) => withIds(item, ids));
    if (example === null || typeof example !== "object") return example;
    return Object.fromEntries(
      Object.entries(example).map(([key, value]) => {
        if (!key.endsWith("_id") || typeof value !== "string") return [key, withIds(value, ids)];
        expect(ids[key], `an id for ${key}`).toBeDefined();
        return [key, ids[key]];
      }),
    );
  }

  const examples = Object.entries(document.paths).flatMap(([template, methods]) =>
    Object.entries(methods as Record<string, Document>).flatMap(([method, operation]) => {
      const example = operation.requestBody?.content?.["application/json"]?.example;
      return example === undefined ? [] : [{ operationId: operation.operationId as string, method, template, example }];
    }),
  );

  it("has one for each create, and a row here for each operation with one", () => {
    expect(examples.map((e) => e.operationId)).toEqual(expect.arrayContaining(["CreatePayment", "CreateRefund", "CreatePayout"]));
    expect(examples.map((e) => e.operationId).sort()).toEqual(Object.keys(rows).sort());
    const create = examples.find((e) => e.operationId === "CreatePayment")!;
    expect(brokenExamples(create.template, create.method, create.example).map(({ rule, field }) => `${rule} ${field}`)).toEqual(
      expect.arrayContaining(["required amount", "required currency", "required profile_id", "minimum amount", "maximum amount"]),
    );
  });

  /**
   * The example broken at each rule the document states for its top-level fields: a required field
   * left out, an integer one past a bound, a string one character too long. The service must refuse
   * each with 400 naming the field, so the document is no stricter than the service on these, and no looser.
   */
  function brokenExamples(template: string, method: string, example: JsonBody): { rule: string; field: string; body: JsonBody }[] {
    const schema = resolve(document.paths[template][method].requestBody.content["application/json"].schema);
    const broken: { rule: string; field: string; body: JsonBody }[] = [];
    for (const field of (schema.required ?? []) as string[]) {
      const { [field]: _left, ...rest } = example;
      broken.push({ rule: "required", field, body: rest });
    }
    for (const [field, property] of Object.entries(schema.properties as Record<string, Document>)) {
      if (property.minimum !== undefined) broken.push({ rule: "minimum", field, body: { ...example, [field]: property.minimum - 1 } });
      if (property.maximum !== undefined) broken.push({ rule: "maximum", field, body: { ...example, [field]: property.maximum + 1 } });
      if (property.maxLength !== undefined) {
        broken.push({ rule: "maxLength", field, body: { ...example, [field]: "x".repeat(property.maxLength + 1) } });
      }
    }
    return broken;
  }

  it.each(examples)(
    "$operationId: each stated rule broken is refused, naming the field",
    async ({ operationId, method, template, example }) => {
      const row = rows[operationId]!;
      const ids = await row.ids();
      const caller = row.caller === "admin" ? "admin" : merchant;
      for (const { rule, field, body } of brokenExamples(template, method, withIds(example, ids) as JsonBody)) {
        const answer = await call(caller, method.toUpperCase(), template, ids, { body });
        expect(answer.status, `${rule} of ${field}: ${answer.text}`).toBe(400);
        expect(answer.body.error.message, `${rule} of ${field}`).toContain(field);
      }
    },
  );

  it.each(examples)("$operationId: the example is answered 200", async ({ operationId, method, template, example }) => {
    const row = rows[operationId]!;
    const ids = await row.ids();
    const caller = row.caller === "admin" ? "admin" : merchant;
    const answer = await call(caller, method.toUpperCase(), template, ids, { body: withIds(example, ids) });
    expect(answer.status, answer.text).toBe(200);
  });
});
