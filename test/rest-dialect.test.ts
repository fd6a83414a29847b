import { request as httpRequest } from "node:http";
import { fromBinary } from "@bufbuild/protobuf";
import { base64Decode } from "@bufbuild/protobuf/wire";
import { describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../gen/paymentservice/v1/error_pb.js";
import { rest, type JsonBody, type RestResponse } from "./support/clients.js";
import { expectExactRestError, expectRestError } from "./support/errors.js";
import { isoUtc } from "./support/formats.js";
import { newMerchant, type TestMerchant } from "./support/merchant.js";
import { runningService } from "./support/running.js";

/*
 * The REST dialect of the transcoder (decisions §1, §5, §7): how REST requests are routed and read
 * before they reach an RPC (REST→RPC), what REST responses look like, and that REST and Connect
 * JSON carry the same data for the same request (RPC↔REST parity). Test names follow vanguard-go,
 * which names its suites by the direction of translation.
 */

const service = runningService();

/** A REST call with a fresh merchant's sandbox secret key. */
async function withMerchant(): Promise<{
  merchant: TestMerchant;
  call: (method: string, path: string, body?: unknown) => Promise<RestResponse>;
}> {
  const merchant = await newMerchant(service.url);
  return { merchant, call: (method, path, body) => rest(service.url, method, path, { apiKey: merchant.apiKey, body }) };
}

/** A request fetch cannot send (a body on GET), through node:http. */
function rawRequest(method: string, path: string, body: string, apiKey: string): Promise<RestResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      service.url + path,
      { method, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), "api-key": apiKey } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          const headers = new Headers(Object.entries(res.headers).flatMap(([k, v]) => (typeof v === "string" ? [[k, v]] : [])));
          resolve({ status: res.statusCode ?? 0, headers, text, body: text === "" ? undefined : JSON.parse(text) });
        });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** A Connect unary call with the JSON codec, as curl or a browser would make it. */
async function connectJson(procedure: string, body: unknown, apiKey: string): Promise<{ status: number; body: JsonBody }> {
  const res = await fetch(`${service.url}/paymentservice.v1.${procedure}`, {
    method: "POST",
    headers: { "content-type": "application/json", "connect-protocol-version": "1", "api-key": apiKey },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

describe("REST→RPC: routing", () => {
  it.each([
    ["GET", "/nothing-here"],
    ["POST", "/customers/cus_1/unknown"],
    ["GET", "/customers/"],
    ["GET", "/"],
  ])("%s %s, a path no operation has, is 404 IR_02", async (method, path) => {
    const { call } = await withMerchant();
    expectExactRestError(await call(method, path), 404, "IR_02", path);
  });

  it.each([
    ["PUT", "/customers", ["POST"]],
    ["DELETE", "/customers", ["POST"]],
    ["PATCH", "/customers/cus_1", ["DELETE", "GET", "POST"]],
    ["PUT", "/health", ["GET"]],
  ])("%s %s, a known path with another method, is 405 IR_03 with the Allow header", async (method, path, allowed) => {
    const { call } = await withMerchant();
    const res = await call(method, path);
    expectExactRestError(res, 405, "IR_03", method);
    expect(res.headers.get("allow")?.split(", ").sort()).toEqual(allowed);
  });

  it("routes GET /customers/list to list, not to retrieving a customer called list", async () => {
    const { call } = await withMerchant();
    await call("POST", "/customers", { name: "a" });
    const res = await call("GET", "/customers/list");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ total_count: 1, has_more: false });
  });

  it("routes POST /customers/list to list, not to updating a customer called list", async () => {
    const { call } = await withMerchant();
    await call("POST", "/customers", { name: "a" });
    await call("POST", "/customers", { name: "b" });
    const res = await call("POST", "/customers/list", { limit: 1 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ total_count: 2, has_more: true });
    expect(res.body.data).toHaveLength(1);
  });

  it("decodes percent-encoded path segments into the path variable", async () => {
    const { call } = await withMerchant();
    await call("POST", "/customers", { customer_id: "cus-a_1" });
    const res = await call("GET", "/customers/cus%2Da_1");
    expect(res.status).toBe(200);
    expect(res.body.customer_id).toBe("cus-a_1");
  });

  // Every method of the API is built now, so no REST path answers 501 IR_00 any more (src/transport/errors.spec.ts and
  // interceptors.spec.ts keep that mapping covered); redeliver, the last one built, routes to its handler.
  it("routes POST /events/:event_id/redeliver to the redelivery: an unknown event is 404 HE_02 in the documented error shape", async () => {
    const { call } = await withMerchant();
    const res = await call("POST", "/events/evt_any/redeliver");
    expect(res.status).toBe(404);
    expect(res.body).toEqual({
      error: { type: "invalid_request", code: "HE_02", message: "Event not found: evt_any", request_id: res.headers.get("x-request-id") },
    });
  });
});

describe("REST→RPC: request bodies", () => {
  it.each([
    ["not JSON at all", "{not json"],
    ["truncated JSON", '{"name": "a"'],
    ["an array", "[]"],
    ["a string", '"customer"'],
  ])("refuses a body that is %s with 400 IR_06", async (_, rawBody) => {
    const { merchant } = await withMerchant();
    const res = await rest(service.url, "POST", "/customers", { apiKey: merchant.apiKey, rawBody });
    expectExactRestError(res, 400, "IR_06");
  });

  it("refuses a body larger than 1 MiB with 413 IR_06 and writes nothing", async () => {
    const { merchant, call } = await withMerchant();
    const rawBody = JSON.stringify({ name: "big", description: "x".repeat(1024 * 1024) });
    const res = await rest(service.url, "POST", "/customers", { apiKey: merchant.apiKey, rawBody });
    expectExactRestError(res, 413, "IR_06", "larger than");
    expect((await call("GET", "/customers/list")).body.total_count).toBe(0);
  });

  it("reads a body that arrives in many pieces", async () => {
    const { merchant } = await withMerchant();
    // 200 kB of JSON whitespace spreads a small customer over many socket reads.
    const rawBody = `{${" ".repeat(200_000)}"name": "pieces", "description": "whole"}`;
    const res = await rawRequest("POST", "/customers", rawBody, merchant.apiKey);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: "pieces", description: "whole" });
  });

  it.each([
    ["at the top level", { name: "a", nickname: "b" }, "nickname"],
    ["inside an object", { address: { city: "Paris", foo: "x" } }, "address.foo"],
    ["in camelCase instead of snake_case", { phoneCountryCode: "+44" }, "phoneCountryCode"],
  ])("refuses an unknown field %s with 400 IR_06 naming it", async (_, body, field) => {
    const { call } = await withMerchant();
    expectExactRestError(await call("POST", "/customers", body), 400, "IR_06", field);
    expect((await call("GET", "/customers/list")).body.total_count).toBe(0);
  });

  it.each([
    ["a string where an object belongs", { address: "1 High Street" }, "address"],
    ["a number where a string belongs", { email: 5 }, "email"],
    ["a number where a string belongs, nested", { address: { postal_code: 12345 } }, "address.postal_code"],
    ["an array where a map belongs", { metadata: ["a"] }, "metadata"],
    ["a boolean where a string belongs", { name: true }, "name"],
  ])("refuses %s with 400 IR_05 naming the field", async (_, body, field) => {
    const { call } = await withMerchant();
    expectExactRestError(await call("POST", "/customers", body), 400, "IR_05", field);
  });

  it.each([
    ["a string", "10"],
    ["a fraction", 1.5],
    ["beyond what the field can hold", 1e20],
  ])("refuses an integer field given as %s with 400 IR_05 naming it, without quoting the wire type's range", async (_, offset) => {
    const { call } = await withMerchant();
    const message = expectRestError(await call("POST", "/customers/list", { offset }), 400, "IR_05");
    expect(message).toContain("offset");
    expect(message).not.toMatch(/2147483647|2147483648/);
  });

  it.each([
    ["a string", "10"],
    ["a fraction", 1.5],
    ["beyond what the field can hold", 1e20],
    ["negative", -1],
  ])("refuses a list limit given as %s with 400 IR_06 naming it (decisions §7: any bad limit)", async (_, limit) => {
    const { call } = await withMerchant();
    expectExactRestError(await call("POST", "/customers/list", { limit }), 400, "IR_06", "limit");
  });

  it("refuses a timestamp that is not ISO 8601 with a zone with 400 IR_05 naming it", async () => {
    const { call } = await withMerchant();
    expectExactRestError(await call("POST", "/customers/list", { created_gte: "2026-01-31 12:00" }), 400, "IR_05", "created_gte");
  });

  it("treats null as an absent field", async () => {
    const { call } = await withMerchant();
    const res = await call("POST", "/customers", { name: "a", email: null, address: null });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: "a", email: null, address: null });
  });

  it("takes the id from the path, not from the body", async () => {
    const { call } = await withMerchant();
    const a = (await call("POST", "/customers", { name: "a" })).body;
    const b = (await call("POST", "/customers", { name: "b" })).body;
    const res = await call("POST", `/customers/${a.customer_id}`, { customer_id: b.customer_id, name: "changed" });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ customer_id: a.customer_id, name: "changed" });
    expect((await call("GET", `/customers/${b.customer_id}`)).body.name).toBe("b");
  });

  it("refuses a body on a route that takes none (GET, DELETE) with 400 IR_06", async () => {
    const { merchant, call } = await withMerchant();
    const id = (await call("POST", "/customers", {})).body.customer_id;
    expectExactRestError(await rawRequest("GET", `/customers/${id}`, '{"name":"x"}', merchant.apiKey), 400, "IR_06");
    expectExactRestError(await rawRequest("GET", "/customers/list", '{"limit":1}', merchant.apiKey), 400, "IR_06");
    expectExactRestError(await call("DELETE", `/customers/${id}`, { reason: "x" }), 400, "IR_06");
    expect((await call("GET", `/customers/${id}`)).status).toBe(200);
  });

  it("refuses a query string on a route that takes a JSON body with 400 IR_06", async () => {
    const { call } = await withMerchant();
    expectExactRestError(await call("POST", "/customers?name=a", {}), 400, "IR_06");
    expectExactRestError(await call("POST", "/customers/list?limit=1", {}), 400, "IR_06");
  });
});

describe("REST→RPC: query parameters", () => {
  it("reads list parameters of GET /customers/list from the query string", async () => {
    const { call } = await withMerchant();
    for (const name of ["a", "b", "c"]) await call("POST", "/customers", { name, email: `${name}@example.com` });
    const page = await call("GET", "/customers/list?limit=1&offset=1");
    expect(page.status).toBe(200);
    expect(page.body).toMatchObject({ total_count: 3, has_more: true });
    expect(page.body.data).toHaveLength(1);

    const byEmail = await call("GET", "/customers/list?email=b%40example.com");
    expect(byEmail.body.data.map((c: { name: string }) => c.name)).toEqual(["b"]);

    const future = encodeURIComponent("2999-01-01T00:00:00Z");
    expect((await call("GET", `/customers/list?created_gte=${future}`)).body).toEqual({ data: [], total_count: 0, has_more: false });
  });

  it("refuses an unknown query parameter with 400 IR_06 naming it", async () => {
    const { call } = await withMerchant();
    expectExactRestError(await call("GET", "/customers/list?colour=blue"), 400, "IR_06", "colour");
    expectExactRestError(await call("GET", "/customers/cus_1?expand=all"), 400, "IR_06", "expand");
  });

  it.each([
    ["offset=1.5", "offset"],
    ["created_lte=yesterday", "created_lte"],
    ["offset=1&offset=2", "offset"],
  ])("refuses ?%s with 400 IR_05 naming the parameter", async (query, field) => {
    const { call } = await withMerchant();
    expectExactRestError(await call("GET", `/customers/list?${query}`), 400, "IR_05", field);
  });

  it.each([["limit=ten"], ["limit=1.5"], ["limit=1&limit=2"], ["limit=99999999999"]])(
    "refuses ?%s with 400 IR_06 naming limit",
    async (query) => {
      const { call } = await withMerchant();
      expectExactRestError(await call("GET", `/customers/list?${query}`), 400, "IR_06", "limit");
    },
  );

  it("applies the list limits to query parameters too (limit 0 → IR_06, offset -1 → IR_05)", async () => {
    const { call } = await withMerchant();
    expectExactRestError(await call("GET", "/customers/list?limit=0"), 400, "IR_06", "limit");
    expectExactRestError(await call("GET", "/customers/list?limit=101"), 400, "IR_06", "limit");
    expectExactRestError(await call("GET", "/customers/list?offset=-1"), 400, "IR_05", "offset");
  });
});

describe("REST→RPC: responses", () => {
  it("uses snake_case keys and includes every field, unset optional ones as null", async () => {
    const { call } = await withMerchant();
    const res = await call("POST", "/customers", { address: { city: "Paris" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.body).toEqual({
      customer_id: expect.any(String),
      merchant_id: expect.any(String),
      email: null,
      name: null,
      phone: null,
      phone_country_code: null,
      description: null,
      address: { line1: null, line2: null, city: "Paris", state: null, postal_code: null, country: null },
      metadata: {},
      created: expect.any(String),
      updated: expect.any(String),
    });
  });

  it("returns metadata keys exactly as sent, without case conversion", async () => {
    const { call } = await withMerchant();
    const metadata = { orderRef: "A-1", "Some Key": "x", snake_case: "y" };
    expect((await call("POST", "/customers", { metadata })).body.metadata).toEqual(metadata);
  });

  it("writes timestamps as ISO 8601 UTC strings ending in Z", async () => {
    const { call } = await withMerchant();
    const customer = (await call("POST", "/customers", {})).body;
    for (const timestamp of [customer.created, customer.updated]) {
      expect(timestamp).toMatch(isoUtc);
      expect(new Date(timestamp).toISOString()).toBe(timestamp);
    }
  });

  it("writes int64 total_count as a JSON number and has_more as a boolean", async () => {
    const { call } = await withMerchant();
    await call("POST", "/customers", {});
    const list = await call("GET", "/customers/list");
    expect(typeof list.body.total_count).toBe("number");
    expect(list.body).toEqual({ data: [expect.any(Object)], total_count: 1, has_more: false });
  });

  it("writes enums as the documented lower-case words", async () => {
    const sandbox = await newMerchant(service.url);
    const production = await newMerchant(service.url, { environment: "production" });
    expect((await rest(service.url, "GET", "/health", { apiKey: sandbox.apiKey })).body.environment).toBe("sandbox");
    expect((await rest(service.url, "GET", "/health", { apiKey: production.apiKey })).body.environment).toBe("production");
  });

  it.each([
    ["unknown path", "GET", "/nothing-here", undefined, 404, "IR_02"],
    ["wrong method", "PUT", "/customers", undefined, 405, "IR_03"],
    ["unknown field", "POST", "/customers", { foo: 1 }, 400, "IR_06"],
    ["malformed field", "POST", "/customers", { email: "x" }, 400, "IR_05"],
    ["bad list limit", "GET", "/customers/list?limit=0", undefined, 400, "IR_06"],
    ["unknown customer", "GET", "/customers/cus_missing", undefined, 404, "HE_02"],
    ["unknown event to redeliver", "POST", "/events/evt_any/redeliver", undefined, 404, "HE_02"],
  ])("answers a %s with exactly {error: {type, code, message, request_id}}", async (_, method, path, body, status, code) => {
    const { call } = await withMerchant();
    const res = await call(method, path, body);
    expect(res.status).toBe(status);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(Object.keys(res.body)).toEqual(["error"]);
    expect(Object.keys(res.body.error).sort()).toEqual(["code", "message", "request_id", "type"]);
    expect(res.body.error).toEqual({
      type: "invalid_request",
      code,
      message: expect.stringMatching(/\S/),
      request_id: res.headers.get("x-request-id"),
    });
  });

  it("answers a missing or unknown api-key with exactly {error: {type, code, message, request_id}} (401 IR_01)", async () => {
    for (const apiKey of [undefined, `snd_${"x".repeat(40)}`]) {
      const res = await rest(service.url, "GET", "/customers/list", { apiKey });
      expect(res.status).toBe(401);
      expect(res.body).toEqual({
        error: {
          type: "authentication_error",
          code: "IR_01",
          message: expect.stringMatching(/\S/),
          request_id: res.headers.get("x-request-id"),
        },
      });
    }
  });
});

/*
 * Connect JSON is standard proto3 JSON: camelCase keys, int64 as strings, enums by full name,
 * default values (false, 0, {}) and unset fields omitted, timestamps with 0, 3, 6 or 9 fractional
 * digits. The REST dialect differs only in those spellings, so after mapping both sides to one
 * form the data must be equal.
 */
const snake = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const isTimestamp = (value: unknown): value is string => typeof value === "string" && isoUtc.test(value);

/** One comparable form: snake_case keys (metadata keys untouched), defaults and nulls dropped, int64 numbers, ms timestamps. */
function comparable(value: unknown, key = ""): unknown {
  if (Array.isArray(value)) return value.map((v) => comparable(v));
  if (isTimestamp(value)) return new Date(value).toISOString();
  if (key === "total_count" && typeof value === "string") return Number(value);
  if (key === "environment" && typeof value === "string") return value.replace(/^ENVIRONMENT_/, "").toLowerCase();
  if (value === null || typeof value !== "object") return value;
  const entries = Object.entries(value).flatMap(([k, v]) => {
    const name = snake(k);
    const mapped = name === "metadata" ? v : comparable(v, name);
    const isDefault =
      mapped === null || mapped === false || mapped === 0 || (typeof mapped === "object" && Object.keys(mapped as object).length === 0);
    return isDefault ? [] : [[name, mapped] as const];
  });
  return Object.fromEntries(entries);
}

describe("RPC↔REST parity: Connect JSON and REST carry the same data", () => {
  it("retrieve answers the same customer", async () => {
    const { merchant, call } = await withMerchant();
    const id = (
      await call("POST", "/customers", {
        email: "jane@example.com",
        phone_country_code: "+44",
        address: { postal_code: "SW1A 1AA", country: "gb" },
        metadata: { orderRef: "A-1" },
      })
    ).body.customer_id;
    const viaRest = await call("GET", `/customers/${id}`);
    const viaConnect = await connectJson("CustomerService/RetrieveCustomer", { customerId: id }, merchant.apiKey);
    expect(viaConnect.status).toBe(200);
    expect(viaConnect.body.address).toEqual({ postalCode: "SW1A 1AA", country: "GB" });
    expect(comparable(viaConnect.body)).toEqual(comparable(viaRest.body));
  });

  it("create and update from the same input give the same customer", async () => {
    const { merchant, call } = await withMerchant();
    const viaRest = await call("POST", "/customers", { name: "Jane", phone_country_code: "+1", metadata: { a: "1" } });
    const viaConnect = await connectJson(
      "CustomerService/CreateCustomer",
      { name: "Jane", phoneCountryCode: "+1", metadata: { a: "1" } },
      merchant.apiKey,
    );
    const { customer_id: _r, created: _rc, updated: _ru, ...restData } = comparable(viaRest.body) as Record<string, unknown>;
    const { customer_id: _c, created: _cc, updated: _cu, ...connectData } = comparable(viaConnect.body) as Record<string, unknown>;
    expect(connectData).toEqual(restData);

    const updatedViaRest = await call("POST", `/customers/${viaRest.body.customer_id}`, { name: "", metadata: { a: "", b: "2" } });
    const updatedViaConnect = await connectJson(
      "CustomerService/UpdateCustomer",
      { customerId: viaConnect.body.customerId, name: "", metadata: { a: "", b: "2" } },
      merchant.apiKey,
    );
    expect(updatedViaRest.body).toMatchObject({ name: null, metadata: { b: "2" } });
    expect(updatedViaConnect.body.name).toBeUndefined();
    expect(updatedViaConnect.body.metadata).toEqual({ b: "2" });
  });

  it("list answers the same page, total_count and has_more", async () => {
    const { merchant, call } = await withMerchant();
    for (let i = 0; i < 3; i++) await call("POST", "/customers", { metadata: { n: String(i) } });
    const viaRest = await call("POST", "/customers/list", { limit: 2 });
    const viaConnect = await connectJson("CustomerService/ListCustomers", { limit: 2 }, merchant.apiKey);
    expect(viaConnect.body.totalCount).toBe("3");
    expect(viaRest.body.total_count).toBe(3);
    expect(comparable(viaConnect.body)).toEqual(comparable(viaRest.body));
  });

  it("health answers the same, the enum spelled per dialect", async () => {
    const { merchant, call } = await withMerchant();
    const viaRest = await call("GET", "/health");
    const viaConnect = await connectJson("HealthService/Check", {}, merchant.apiKey);
    expect(viaConnect.body.environment).toBe("ENVIRONMENT_SANDBOX");
    expect(viaRest.body.environment).toBe("sandbox");
    expect(comparable(viaConnect.body)).toEqual(comparable(viaRest.body));
  });

  it.each([
    ["a malformed field", "CustomerService/CreateCustomer", { email: "x" }, "/customers", { email: "x" }, 400],
    ["an unknown customer", "CustomerService/RetrieveCustomer", { customerId: "cus_missing" }, "/customers/cus_missing", undefined, 404],
    ["a bad list limit", "CustomerService/ListCustomers", { limit: 101 }, "/customers/list", { limit: 101 }, 400],
  ])(
    "an error for %s carries the same {type, code, message} both ways, each naming its request",
    async (_, procedure, connectBody, path, restBody, status) => {
      const { merchant, call } = await withMerchant();
      const viaRest = await call(restBody === undefined ? "GET" : "POST", path, restBody);
      const viaConnect = await connectJson(procedure, connectBody, merchant.apiKey);
      expect(viaRest.status).toBe(status);
      expect(viaConnect.status).toBe(status);
      const details = (viaConnect.body.details as { type: string; value: string }[]).filter((d) => d.type === ErrorDetailSchema.typeName);
      expect(details).toHaveLength(1);
      const detail = fromBinary(ErrorDetailSchema, base64Decode(details[0]!.value));
      const { request_id: restRequestId, ...restError } = viaRest.body.error;
      expect({ type: detail.type, code: detail.code, message: detail.message }).toEqual(restError);
      expect(viaConnect.body.message).toBe(viaRest.body.error.message);
      expect(restRequestId).toBe(viaRest.headers.get("x-request-id"));
      expect(detail.requestId).toMatch(/^req_/);
      expect(detail.requestId).not.toBe(restRequestId);
    },
  );

  it("a Connect JSON body connect cannot decode is IR_06 in the documented shape too, naming the field, not quoting the value", async () => {
    const body = { email: 42 };
    const message = "Invalid value for field email: expected a string";
    const { merchant, call } = await withMerchant();
    const viaConnect = await connectJson("CustomerService/CreateCustomer", body, merchant.apiKey);
    expect(viaConnect.status).toBe(400);
    expect(viaConnect.body.code).toBe("invalid_argument");
    expect(viaConnect.body.message).toBe(message);
    const details = (viaConnect.body.details as { type: string; value: string }[]).filter((d) => d.type === ErrorDetailSchema.typeName);
    expect(details).toHaveLength(1);
    const detail = fromBinary(ErrorDetailSchema, base64Decode(details[0]!.value));
    expect({ type: detail.type, code: detail.code, message: detail.message }).toEqual({ type: "invalid_request", code: "IR_06", message });
    // REST reads the body itself and names the field in its own words.
    expectExactRestError(await call("POST", "/customers", body), 400, "IR_05", "email");
  });
});
