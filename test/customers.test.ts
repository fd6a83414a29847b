import { describe, expect, it } from "vitest";
import { rest } from "./support/clients.js";
import { isoUtc } from "./support/formats.js";
import { issueKey, newMerchant, type TestMerchant } from "./support/merchant.js";
import { expectError, type Json, restCaller, restList, uniqueId } from "./support/resource-api.js";
import { runningService } from "./support/running.js";

/*
 * Customers (interface §2 and §4, decisions §4, §5, §7), each scenario once, over REST: it talks to a
 * small CustomerApi that sends the documented JSON. That every RPC carries the same request and answer
 * over Connect, gRPC and gRPC-Web is the protocol-parity suite's subject (test/parity).
 */

const service = runningService();

/** The customer operations, as seen by a caller; results use the REST field names. */
interface CustomerApi {
  create(body: Json): Promise<Json>;
  update(customerId: string, body: Json): Promise<Json>;
  retrieve(customerId: string): Promise<Json>;
  list(params: Json): Promise<Json>;
  delete(customerId: string): Promise<Json>;
}

function restApi(apiKey: string, listWith: "GET" | "POST" = "POST"): CustomerApi {
  const call = restCaller(service.url, apiKey);
  const at = (id: string) => `/customers/${encodeURIComponent(id)}`;
  return {
    create: (body) => call("POST", "/customers", body),
    update: (id, body) => call("POST", at(id), body),
    retrieve: (id) => call("GET", at(id)),
    list: restList(call, listWith, "/customers/list"),
    delete: (id) => call("DELETE", at(id)),
  };
}

/** A fresh merchant (sandbox secret key) and its CustomerApi, so each scenario works in a merchant of its own. */
async function merchantApi(listWith: "GET" | "POST" = "POST"): Promise<{ merchant: TestMerchant; api: CustomerApi }> {
  const merchant = await newMerchant(service.url);
  return { merchant, api: restApi(merchant.apiKey, listWith) };
}

/** Waits until the clock has moved past `timestamp`, so the next object is strictly newer. */
async function pastMillisecond(timestamp: unknown): Promise<void> {
  while (Date.now() <= Date.parse(String(timestamp))) await new Promise((resolve) => setTimeout(resolve, 1));
}

/** Creates customers one after another with distinct creation times; oldest first. */
async function createInOrder(api: CustomerApi, bodies: Json[]): Promise<Json[]> {
  const created: Json[] = [];
  for (const body of bodies) {
    const customer = await api.create(body);
    created.push(customer);
    await pastMillisecond(customer.created);
  }
  return created;
}

const ids = (list: Json) => (list.data as Json[]).map((c) => c.customer_id);

const fullBody: Json = {
  email: "jane@example.com",
  name: "Jane Doe",
  phone: "20 7946 0958",
  phone_country_code: "+44",
  description: "Regular",
  address: { line1: "1 High Street", line2: "Flat 2", city: "London", state: "Greater London", postal_code: "SW1A 1AA", country: "gb" },
  metadata: { order: "42", segment: "retail" },
};

describe("customers", () => {
  describe("create", () => {
    it("creates a customer from an empty object, every optional field null", async () => {
      const { merchant, api } = await merchantApi();
      const customer = await api.create({});
      expect(customer).toEqual({
        customer_id: expect.stringMatching(/^cus_/),
        merchant_id: merchant.merchantId,
        email: null,
        name: null,
        phone: null,
        phone_country_code: null,
        description: null,
        address: null,
        metadata: {},
        created: expect.stringMatching(isoUtc),
        updated: customer.created,
      });
    });

    it("stores every field, with a lower-case country upper-cased", async () => {
      const { merchant, api } = await merchantApi();
      const customer = await api.create(fullBody);
      expect(customer).toEqual({
        ...fullBody,
        address: { ...(fullBody.address as Json), country: "GB" },
        customer_id: expect.stringMatching(/^cus_/),
        merchant_id: merchant.merchantId,
        created: expect.stringMatching(isoUtc),
        updated: customer.created,
      });
      expect(await api.retrieve(customer.customer_id as string)).toEqual(customer);
    });

    it("generates a new id for each customer", async () => {
      const { api } = await merchantApi();
      const [a, b] = await Promise.all([api.create({}), api.create({})]);
      expect(a!.customer_id).not.toBe(b!.customer_id);
    });

    it("accepts a caller-chosen customer_id, refuses a duplicate with 409 HE_01, and scopes ids per merchant", async () => {
      const { api } = await merchantApi();
      const id = uniqueId("crm");
      expect(await api.create({ customer_id: id, name: "First" })).toMatchObject({ customer_id: id, name: "First" });
      await expectError(api.create({ customer_id: id, name: "Second" }), "HE_01", id);
      expect(await api.retrieve(id)).toMatchObject({ name: "First" });

      const other = await merchantApi();
      expect(await other.api.create({ customer_id: id })).toMatchObject({ customer_id: id });
    });

    it("refuses a customer_id that is not 1-64 letters, digits, '_' or '-'", async () => {
      const { api } = await merchantApi();
      await expectError(api.create({ customer_id: "has space" }), "IR_05", "customer_id");
      await expectError(api.create({ customer_id: "x".repeat(65) }), "IR_05", "customer_id");
    });

    it('refuses customer_id "list", which /customers/list would make unreachable over REST', async () => {
      const { api } = await merchantApi();
      await expectError(api.create({ customer_id: "list" }), "IR_05", "customer_id");
      expect((await api.list({})).total_count).toBe(0);
    });
  });

  describe("validation names the field", () => {
    const tooMany = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, "v"]));
    const longKey = "k".repeat(41);
    it.each([
      ["email", { email: "not-an-email" }, "email"],
      ["address.country", { address: { country: "XX" } }, "address.country"],
      ["phone_country_code without +", { phone_country_code: "44" }, "phone_country_code"],
      ["51 metadata keys", { metadata: tooMany }, "metadata"],
      ["a metadata key over 40 characters", { metadata: { [longKey]: "v" } }, `metadata.${longKey}`],
      ["a metadata value over 500 characters", { metadata: { note: "v".repeat(501) } }, "metadata.note"],
    ])("create with a bad %s is 400 IR_05", async (_, body, field) => {
      const { api } = await merchantApi();
      await expectError(api.create(body as Json), "IR_05", field);
      expect((await api.list({})).total_count).toBe(0);
    });

    it("accepts metadata exactly at the limits: 50 keys, 40-character keys, 500-character values", async () => {
      const { api } = await merchantApi();
      const metadata = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`${i}`.padStart(40, "k"), "v".repeat(500)]));
      expect((await api.create({ metadata })).metadata).toEqual(metadata);
    });

    it("checks fields on update too, and a refused update changes nothing", async () => {
      const { api } = await merchantApi();
      const customer = await api.create(fullBody);
      const id = customer.customer_id as string;
      await expectError(api.update(id, { name: "New", email: "nope" }), "IR_05", "email");
      await expectError(api.update(id, { address: { country: "XX" } }), "IR_05", "address.country");
      await expectError(api.update(id, { phone_country_code: "44" }), "IR_05", "phone_country_code");
      expect(await api.retrieve(id)).toEqual(customer);
    });

    it("counts metadata keys after merging on update", async () => {
      const { api } = await merchantApi();
      const metadata = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, "v"]));
      const id = (await api.create({ metadata })).customer_id as string;
      await expectError(api.update(id, { metadata: { extra: "v" } }), "IR_05", "metadata");
      const updated = await api.update(id, { metadata: { k0: "", extra: "v" } });
      expect(Object.keys(updated.metadata as Json)).toHaveLength(50);
      expect(updated.metadata).toMatchObject({ extra: "v" });
      expect(updated.metadata).not.toHaveProperty("k0");
    });
  });

  describe("update", () => {
    it('keeps unsent fields, clears fields sent as "", merges metadata, moves updated but not created', async () => {
      const { api } = await merchantApi();
      const before = await api.create({ ...fullBody, metadata: { keep: "1", change: "old", drop: "x" } });
      await pastMillisecond(before.updated);

      const after = await api.update(before.customer_id as string, {
        name: "Jane Smith",
        description: "",
        phone: "",
        metadata: { change: "new", drop: "", added: "2" },
      });

      expect(after).toEqual({
        ...before,
        name: "Jane Smith",
        description: null,
        phone: null,
        metadata: { keep: "1", change: "new", added: "2" },
        updated: expect.stringMatching(isoUtc),
      });
      expect(Date.parse(after.updated as string)).toBeGreaterThan(Date.parse(before.updated as string));
      expect(await api.retrieve(before.customer_id as string)).toEqual(after);
    });

    it("replaces the whole address when one is sent", async () => {
      const { api } = await merchantApi();
      const before = await api.create(fullBody);
      const after = await api.update(before.customer_id as string, { address: { city: "Paris", country: "fr" } });
      expect(after.address).toEqual({ line1: null, line2: null, city: "Paris", state: null, postal_code: null, country: "FR" });
      expect(after.email).toBe(before.email);
    });

    it("answers 404 HE_02 for an unknown customer", async () => {
      const { api } = await merchantApi();
      await expectError(api.update("cus_missing", { name: "x" }), "HE_02", "cus_missing");
    });
  });

  describe("retrieve", () => {
    it("returns the customer as create returned it", async () => {
      const { api } = await merchantApi();
      const customer = await api.create(fullBody);
      expect(await api.retrieve(customer.customer_id as string)).toEqual(customer);
    });

    it("answers 404 HE_02 for an unknown customer", async () => {
      const { api } = await merchantApi();
      await expectError(api.retrieve("cus_missing"), "HE_02", "cus_missing");
    });
  });

  describe("delete", () => {
    it("answers {customer_id, deleted: true}; afterwards the customer is gone but its id stays taken", async () => {
      const { api } = await merchantApi();
      const kept = await api.create({});
      const id = (await api.create({ customer_id: uniqueId("gone") })).customer_id as string;

      expect(await api.delete(id)).toEqual({ customer_id: id, deleted: true });

      await expectError(api.retrieve(id), "HE_02", id);
      await expectError(api.update(id, { name: "x" }), "HE_02", id);
      await expectError(api.delete(id), "HE_02", id);
      expect(await api.list({})).toEqual({ data: [kept], total_count: 1, has_more: false });
      await expectError(api.create({ customer_id: id }), "HE_01", id);
    });
  });

  describe("partitions", () => {
    it("another merchant can neither see, update nor delete a customer (404 HE_02)", async () => {
      const owner = await merchantApi();
      const customer = await owner.api.create(fullBody);
      const id = customer.customer_id as string;

      const stranger = await merchantApi();
      await expectError(stranger.api.retrieve(id), "HE_02");
      await expectError(stranger.api.update(id, { name: "Mallory" }), "HE_02");
      await expectError(stranger.api.delete(id), "HE_02");
      expect(await stranger.api.list({})).toEqual({ data: [], total_count: 0, has_more: false });

      expect(await owner.api.retrieve(id)).toEqual(customer);
    });

    it("a production key of the same merchant does not see sandbox customers, and the reverse", async () => {
      const { merchant, api: sandbox } = await merchantApi();
      const production = restApi(await issueKey(service.url, merchant.merchantId, "production"));
      const sandboxCustomer = await sandbox.create(fullBody);
      const id = sandboxCustomer.customer_id as string;

      await expectError(production.retrieve(id), "HE_02");
      await expectError(production.update(id, { name: "x" }), "HE_02");
      await expectError(production.delete(id), "HE_02");
      expect(await production.list({})).toEqual({ data: [], total_count: 0, has_more: false });

      const productionCustomer = await production.create({ name: "Live" });
      expect(productionCustomer.merchant_id).toBe(merchant.merchantId);
      await expectError(sandbox.retrieve(productionCustomer.customer_id as string), "HE_02");
      expect(ids(await sandbox.list({}))).toEqual([id]);
      expect(await sandbox.retrieve(id)).toEqual(sandboxCustomer);
    });

    it("keeps separate id spaces for sandbox and production: the same chosen id works in both", async () => {
      const { merchant, api: sandbox } = await merchantApi();
      const production = restApi(await issueKey(service.url, merchant.merchantId, "production"));
      const chosen = uniqueId("cus_both");
      const inSandbox = await sandbox.create({ customer_id: chosen, name: "Test" });
      const inProduction = await production.create({ customer_id: chosen, name: "Live" });
      expect((await sandbox.retrieve(chosen)).name).toBe(inSandbox.name);
      expect((await production.retrieve(chosen)).name).toBe(inProduction.name);
    });
  });
});

describe.each(["POST", "GET"] as const)("listing customers with %s", (listWith) => {
  it("lists newest first with exact total_count and has_more across pages", async () => {
    const { api } = await merchantApi(listWith);
    const [c1, c2, c3] = await createInOrder(api, [{ name: "one" }, { name: "two" }, { name: "three" }]);

    expect(await api.list({})).toEqual({ data: [c3, c2, c1], total_count: 3, has_more: false });
    expect(await api.list({ limit: 2 })).toEqual({ data: [c3, c2], total_count: 3, has_more: true });
    expect(await api.list({ limit: 2, offset: 2 })).toEqual({ data: [c1], total_count: 3, has_more: false });
    expect(await api.list({ limit: 1, offset: 1 })).toEqual({ data: [c2], total_count: 3, has_more: true });
    expect(await api.list({ offset: 3 })).toEqual({ data: [], total_count: 3, has_more: false });
  });

  it("returns 10 by default and at most 100", async () => {
    const { api } = await merchantApi(listWith);
    await Promise.all(Array.from({ length: 11 }, () => api.create({})));
    const page = await api.list({});
    expect(page.data).toHaveLength(10);
    expect(page).toMatchObject({ total_count: 11, has_more: true });
    expect(await api.list({ limit: 100 })).toMatchObject({ total_count: 11, has_more: false });
  });

  it("filters by created_gte, created_lte (both inclusive) and email", async () => {
    const { api } = await merchantApi(listWith);
    const [c1, c2, c3] = await createInOrder(api, [{}, { email: "two@example.com" }, {}]);

    expect(await api.list({ created_gte: c2!.created! })).toEqual({ data: [c3, c2], total_count: 2, has_more: false });
    expect(await api.list({ created_lte: c2!.created! })).toEqual({ data: [c2, c1], total_count: 2, has_more: false });
    expect(await api.list({ created_gte: c2!.created!, created_lte: c2!.created! })).toEqual({
      data: [c2],
      total_count: 1,
      has_more: false,
    });
    expect(ids(await api.list({ email: "two@example.com" }))).toEqual([c2!.customer_id]);
  });

  it.each([0, 101])("refuses limit %i with 400 IR_06", async (limit) => {
    const { api } = await merchantApi(listWith);
    await expectError(api.list({ limit }), "IR_06", "limit");
  });

  it("refuses offset -1 with 400 IR_05 naming offset", async () => {
    const { api } = await merchantApi(listWith);
    await expectError(api.list({ offset: -1 }), "IR_05", "offset");
  });
});

describe("customers over REST only", () => {
  it.each([
    ["a number", 1],
    ["a boolean", true],
    ["an object", { nested: "x" }],
  ])("refuses a metadata value that is %s with 400 IR_05 naming metadata.<key>", async (_, value) => {
    const merchant = await newMerchant(service.url);
    const res = await rest(service.url, "POST", "/customers", {
      apiKey: merchant.apiKey,
      body: { metadata: { fine: "ok", order_no: value } },
    });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: {
        type: "invalid_request",
        code: "IR_05",
        message: expect.stringContaining("metadata.order_no"),
        request_id: res.headers.get("x-request-id"),
      },
    });
  });

  it("lists the same page via GET query parameters and via POST body", async () => {
    const merchant = await newMerchant(service.url);
    const api = restApi(merchant.apiKey);
    const [, c2] = await createInOrder(api, [{}, {}, {}]);
    const query = `limit=1&offset=1&created_lte=${encodeURIComponent(c2!.created as string)}`;
    const viaGet = await rest(service.url, "GET", `/customers/list?${query}`, { apiKey: merchant.apiKey });
    const viaPost = await rest(service.url, "POST", "/customers/list", {
      apiKey: merchant.apiKey,
      body: { limit: 1, offset: 1, created_lte: c2!.created },
    });
    expect(viaGet.status).toBe(200);
    expect(viaGet.body).toEqual(viaPost.body);
    expect(viaGet.body).toMatchObject({ total_count: 2, has_more: false });
  });
});
