import pg from "pg";
import { describe, expect, it } from "vitest";
import type { DataSource } from "typeorm";
import { mergeListCounts } from "../src/db/list-counts.js";
import { reapOldEvents } from "../src/events/retention.js";
import { visaCard as card } from "./support/cards.js";
import { rest, type JsonBody } from "./support/clients.js";
import { fileDatabaseUrl, onPostgres } from "./support/database.js";
import { issueKey, newMerchant, type TestMerchant } from "./support/merchant.js";
import { createPayment } from "./support/payments.js";
import { runningService, servicePair } from "./support/running.js";
import { noPolling } from "./support/service.js";

/*
 * The total_count of a payment list (by status or unfiltered) and of an event list (by type or
 * unfiltered) comes from counts the database keeps per merchant and environment as payments and
 * events are written (src/db/list-counts.ts), not from walking the matches. Whatever path wrote
 * them, and however the counts' deltas were merged meanwhile, every total must be the number of
 * objects stored, and the number a page-by-page walk of the same filter finds.
 */

const declinedCard = { ...card, card_number: "4000000000000002" };

/** The list's total_count for `params` (GET /payments/list, or the list at `path`). */
async function totalCount(
  url: string,
  merchant: TestMerchant,
  params: Record<string, string> = {},
  path = "/payments/list",
): Promise<number> {
  const res = await rest(url, "GET", `${path}?${new URLSearchParams(params)}`, { apiKey: merchant.apiKey });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.total_count as number;
}

/** Every payment the list shows for `params`, walked 100 at a time. */
async function walk(url: string, merchant: TestMerchant, params: Record<string, string> = {}): Promise<JsonBody[]> {
  const seen: JsonBody[] = [];
  for (;;) {
    const query = new URLSearchParams({ ...params, limit: "100", offset: String(seen.length) });
    const res = await rest(url, "GET", `/payments/list?${query}`, { apiKey: merchant.apiKey });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    seen.push(...res.body.data);
    if (!res.body.has_more) return seen;
  }
}

/** The stored payments of `merchant` per status, counted by the database itself. */
async function storedPerStatus(dataSource: DataSource, merchant: TestMerchant): Promise<Record<string, number>> {
  const rows: { status: string; n: number }[] = await dataSource.query(
    "SELECT status, count(*)::int AS n FROM payments WHERE merchant_id = $1 AND NOT livemode GROUP BY status",
    [merchant.merchantId],
  );
  return Object.fromEntries(rows.map((row) => [row.status, row.n]));
}

/** Asserts that every status's total_count, and the unfiltered one, are the numbers of payments stored. */
async function expectTotalsMatch(url: string, dataSource: DataSource, merchant: TestMerchant): Promise<Record<string, number>> {
  const stored = await storedPerStatus(dataSource, merchant);
  const statuses = ["requires_payment_method", "requires_capture", "succeeded", "failed", "cancelled", "processing"];
  const totals = Object.fromEntries(
    await Promise.all(statuses.map(async (status) => [status, await totalCount(url, merchant, { status })])),
  );
  expect(totals).toEqual(Object.fromEntries(statuses.map((status) => [status, stored[status] ?? 0])));
  expect(await totalCount(url, merchant)).toBe(Object.values(stored).reduce((sum, n) => sum + n, 0));
  return totals;
}

/** Asserts that every event type's total_count, and the unfiltered one, are the numbers of events stored; returns them. */
async function expectEventTotalsMatch(url: string, dataSource: DataSource, merchant: TestMerchant): Promise<Record<string, number>> {
  const rows: { type: string; n: number }[] = await dataSource.query(
    "SELECT type, count(*)::int AS n FROM events WHERE merchant_id = $1 AND NOT livemode GROUP BY type",
    [merchant.merchantId],
  );
  const stored = Object.fromEntries(rows.map((row) => [row.type, row.n]));
  const types = ["payment.succeeded", "payment.failed", "payment.cancelled", "payment.requires_capture", "payment.processing"];
  const totals = Object.fromEntries(
    await Promise.all(types.map(async (type) => [type, await totalCount(url, merchant, { type }, "/events/list")])),
  );
  expect(totals).toEqual(Object.fromEntries(types.map((type) => [type, stored[type] ?? 0])));
  expect(await totalCount(url, merchant, {}, "/events/list")).toBe(rows.reduce((sum, row) => sum + row.n, 0));
  return totals;
}

describe("payment and event lists count exactly, before and after the counts are merged", () => {
  const service = runningService(noPolling);

  it("counts created, confirmed, declined, authorized, captured and cancelled payments per status, per merchant and environment", async () => {
    const merchant = await newMerchant(service.url);
    const other = await newMerchant(service.url);
    const pay = (body: Record<string, unknown>) => createPayment(service.url, merchant, body);
    const created = await Promise.all([pay({}), pay({}), pay({}), pay({})]);
    await Promise.all([pay({ confirm: true, payment_method_data: { card } }), pay({ confirm: true, payment_method_data: { card } })]);
    await pay({ confirm: true, payment_method_data: { card: declinedCard } });
    const authorized = await Promise.all(
      [1, 2, 3].map(() => pay({ confirm: true, capture_method: "manual", payment_method_data: { card } })),
    );
    const move = async (path: string, body: Record<string, unknown>) => {
      const res = await rest(service.url, "POST", path, { apiKey: merchant.apiKey, body });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    };
    await move(`/payments/${authorized[0].payment_id}/capture`, {});
    await move(`/payments/${authorized[1].payment_id}/cancel`, {});
    await move(`/payments/${created[0].payment_id}/cancel`, {});
    await move(`/payments/${created[1].payment_id}/confirm`, { payment_method_data: { card } });
    await createPayment(service.url, other, { confirm: true, payment_method_data: { card } });

    const expected = { requires_payment_method: 2, requires_capture: 1, succeeded: 4, failed: 1, cancelled: 2, processing: 0 };
    expect(await expectTotalsMatch(service.url, service.app.dataSource, merchant)).toEqual(expected);
    expect((await walk(service.url, merchant, { status: "succeeded" })).map((p) => p.status)).toEqual(Array(4).fill("succeeded"));
    expect(await walk(service.url, merchant)).toHaveLength(10);
    expect(await totalCount(service.url, other)).toBe(1);
    const production = await issueKey(service.url, merchant.merchantId, "production");
    expect(await totalCount(service.url, { ...merchant, apiKey: production })).toBe(0);

    await mergeListCounts(service.app.dataSource);
    const rows: { key: string; rows: number }[] = await service.app.dataSource.query(
      "SELECT key, count(*)::int AS rows FROM list_counts WHERE list = 'payments' AND merchant_id = $1 GROUP BY key",
      [merchant.merchantId],
    );
    expect(rows.every((row) => row.rows === 1)).toBe(true);
    expect(await expectTotalsMatch(service.url, service.app.dataSource, merchant)).toEqual(expected);
    expect(await mergeListCounts(service.app.dataSource)).toBe(0);
  });

  it("a filter beyond the status (customer, currency, method, created window) is counted from the matches themselves", async () => {
    const merchant = await newMerchant(service.url);
    const customer = await rest(service.url, "POST", "/customers", { apiKey: merchant.apiKey, body: { email: "c@example.com" } });
    expect(customer.status).toBe(200);
    const customerId = customer.body.customer_id as string;
    await createPayment(service.url, merchant, { customer_id: customerId, confirm: true, payment_method_data: { card } });
    await createPayment(service.url, merchant, { confirm: true, payment_method_data: { card } });
    await createPayment(service.url, merchant, { currency: "EUR" });
    expect(await totalCount(service.url, merchant, { status: "succeeded", customer_id: customerId })).toBe(1);
    expect(await totalCount(service.url, merchant, { currency: "EUR" })).toBe(1);
    expect(await totalCount(service.url, merchant, { status: "succeeded", created_gte: "2999-01-01T00:00:00Z" })).toBe(0);
    expect(await totalCount(service.url, merchant, { status: "succeeded" })).toBe(2);
  });

  it("a page and its total_count agree while payments commit, counted or kept: every page shows all of its total", async () => {
    const merchant = await newMerchant(service.url);
    const customer = await rest(service.url, "POST", "/customers", { apiKey: merchant.apiKey, body: { email: "c@example.com" } });
    const customerId = customer.body.customer_id as string;
    const payments = 96;
    let writing = true;
    const filters: Record<string, string>[] = [{}, { status: "succeeded" }, { customer_id: customerId }];
    const disagreements: string[] = [];
    const totalsSeen = new Set<number>();
    const reading = filters.map(async (params) => {
      while (writing) {
        const query = new URLSearchParams({ ...params, limit: "100" });
        const res = await rest(service.url, "GET", `/payments/list?${query}`, { apiKey: merchant.apiKey });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        totalsSeen.add(res.body.total_count);
        if (res.body.data.length !== res.body.total_count) {
          disagreements.push(`${query}: ${res.body.data.length} shown of ${res.body.total_count}`);
        }
      }
    });
    for (let i = 0; i < payments; i += 8) {
      await Promise.all(
        Array.from({ length: 8 }, () =>
          createPayment(service.url, merchant, { customer_id: customerId, confirm: true, payment_method_data: { card } }),
        ),
      );
    }
    writing = false;
    await Promise.all(reading);
    expect(disagreements).toEqual([]);
    // The lists were read while the payments committed, not only before or after.
    expect([...totalsSeen].filter((total) => total > 0 && total < payments).length).toBeGreaterThan(2);
  });

  it("counts events per type, as written and as the retention removes them; by object they are counted from the matches", async () => {
    const merchant = await newMerchant(service.url);
    const pay = (body: Record<string, unknown>) => createPayment(service.url, merchant, body);
    await Promise.all([pay({ confirm: true, payment_method_data: { card } }), pay({ confirm: true, payment_method_data: { card } })]);
    await pay({ confirm: true, payment_method_data: { card: declinedCard } });
    const authorized = await pay({ confirm: true, capture_method: "manual", payment_method_data: { card } });
    const cancelled = await rest(service.url, "POST", `/payments/${authorized.payment_id}/cancel`, { apiKey: merchant.apiKey, body: {} });
    expect(cancelled.status).toBe(200);

    const totals = await expectEventTotalsMatch(service.url, service.app.dataSource, merchant);
    expect(totals).toMatchObject({ "payment.succeeded": 2, "payment.failed": 1, "payment.requires_capture": 1, "payment.cancelled": 1 });
    const byObject = await totalCount(service.url, merchant, { object_id: authorized.payment_id }, "/events/list");
    expect(byObject).toBe(2);
    await mergeListCounts(service.app.dataSource);
    expect(await expectEventTotalsMatch(service.url, service.app.dataSource, merchant)).toEqual(totals);

    expect(await reapOldEvents(service.app.dataSource, new Date(Date.now() + 60_000))).toBeGreaterThan(0);
    expect(Object.values(await expectEventTotalsMatch(service.url, service.app.dataSource, merchant)).every((n) => n === 0)).toBe(true);
    expect(await totalCount(service.url, merchant, {}, "/events/list")).toBe(0);
  });
});

describe.skipIf(!onPostgres)("payment and event counts under concurrent writes and merges on two instances (PostgreSQL only)", () => {
  const { a, b, instance } = servicePair(noPolling);

  it("a merge while another vacuum holds list_counts merges, skips its own vacuum and does not fail", async () => {
    const merchant = await newMerchant(a.url);
    const db = new pg.Client({ connectionString: await fileDatabaseUrl()! });
    await db.connect();
    let created = 0;
    try {
      await db.query("BEGIN");
      // The lock a VACUUM holds on the table: another instance's merge, or autovacuum.
      await db.query("LOCK TABLE list_counts IN SHARE UPDATE EXCLUSIVE MODE");
      let merged = 0;
      // The instances' own merges (every 2 s) may take the new deltas first: then write more.
      for (let attempt = 0; attempt < 5 && merged === 0; attempt++) {
        await createPayment(a.url, merchant);
        await createPayment(b.url, merchant);
        created += 2;
        merged = await mergeListCounts(a.app.dataSource);
      }
      expect(merged).toBeGreaterThan(0);
    } finally {
      await db.query("ROLLBACK");
      await db.end();
    }
    expect(await totalCount(a.url, merchant)).toBe(created);
  });

  it("racing confirms, captures and cancels, merged meanwhile by both instances, leave every payment and event total exact", async () => {
    const merchant = await newMerchant(a.url);
    const trials = 40;
    let writing = true;
    let merges = 0;
    const merging = [a, b].map(async (service) => {
      while (writing) merges += (await mergeListCounts(service.app.dataSource)) > 0 ? 1 : 0;
    });

    await Promise.all(
      Array.from({ length: trials }, async (_, i) => {
        const url = instance(i).url;
        const otherUrl = instance(i + 1).url;
        const created = await createPayment(url, merchant);
        const authorized = await createPayment(url, merchant, { confirm: true, capture_method: "manual", payment_method_data: { card } });
        await Promise.all([
          rest(url, "POST", `/payments/${created.payment_id}/confirm`, {
            apiKey: merchant.apiKey,
            body: { payment_method_data: { card } },
          }),
          rest(otherUrl, "POST", `/payments/${created.payment_id}/cancel`, { apiKey: merchant.apiKey, body: {} }),
          rest(url, "POST", `/payments/${authorized.payment_id}/capture`, { apiKey: merchant.apiKey, body: {} }),
          rest(otherUrl, "POST", `/payments/${authorized.payment_id}/cancel`, { apiKey: merchant.apiKey, body: {} }),
        ]);
        await createPayment(otherUrl, merchant, { confirm: true, payment_method_data: { card } });
      }),
    );
    writing = false;
    await Promise.all(merging);
    expect(merges).toBeGreaterThan(0);

    const totals = await expectTotalsMatch(a.url, a.app.dataSource, merchant);
    expect(Object.values(totals).reduce((sum, n) => sum + n, 0)).toBe(trials * 3);
    expect(totals).toMatchObject({ requires_payment_method: 0, requires_capture: 0, processing: 0 });
    await mergeListCounts(b.app.dataSource);
    expect(await expectTotalsMatch(b.url, b.app.dataSource, merchant)).toEqual(totals);
    expect(Object.values(await expectEventTotalsMatch(b.url, b.app.dataSource, merchant)).reduce((sum, n) => sum + n, 0)).toBeGreaterThan(
      trials,
    );
  });
});
