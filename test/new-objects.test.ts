import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rest, type RestResponse } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { expectRestError } from "./support/errors.js";
import { newMerchant, type TestMerchant } from "./support/merchant.js";
import { payoutAccounts } from "./support/payout-destinations.js";
import { startService, type TestService } from "./support/service.js";

/*
 * Payments and payouts that calls create at the same moment reach the database together, in one
 * statement (docs/architecture.md, "Writing new objects"). Whatever its neighbours do, each call
 * must get its own answer and leave exactly its own rows: these tests send mixed bursts at one
 * instance, on both databases.
 */

/** Text that an array literal must escape: quotes, braces, commas, backslashes, the word NULL. */
const awkward = 'a "quoted", {braced} \\ back\\slash NULL é 💳';

const card = { card_number: "4242424242424242", card_exp_month: "12", card_exp_year: "2035", card_cvc: "123" };

let service: TestService;
const clock = new TestClock();

beforeAll(async () => {
  service = await startService({ JOB_POLL_MS: "3600000" }, clock);
});
afterAll(async () => {
  await service?.close();
});

async function count(sql: string, params: unknown[]): Promise<number> {
  const [row] = await service.app.dataSource.query(sql, params);
  return Number(row.n);
}

/** The event types stored for an object, sorted. */
async function eventTypes(merchant: TestMerchant, objectId: string): Promise<string[]> {
  const rows: { type: string }[] = await service.app.dataSource.query(
    "SELECT type FROM events WHERE merchant_id = $1 AND object_id = $2 ORDER BY type",
    [merchant.merchantId, objectId],
  );
  return rows.map((row) => row.type);
}

function summary(responses: RestResponse[]): string {
  return responses.map((r) => `${r.status} ${r.body?.error?.code ?? r.body?.status}`).join(", ");
}

describe("payments created in one burst", () => {
  it("each call gets its own answer: others' bad profile, missing customer or taken id fail only themselves", async () => {
    const merchant = await newMerchant(service.url);
    const other = await newMerchant(service.url);
    const customer = await rest(service.url, "POST", "/customers", { apiKey: merchant.apiKey, body: {} });
    expect(customer.status).toBe(200);
    const chosenId = `order_${Date.now()}`;
    const kinds = ["automatic", "manual", "customer", "otherProfile", "missingCustomer", "chosenId"] as const;
    const bodies = Array.from({ length: 48 }, (_, i) => {
      const kind = kinds[i % kinds.length]!;
      const base = { amount: 1000 + i, currency: "USD", profile_id: merchant.profileId, description: awkward, metadata: { index: String(i), note: awkward } };
      switch (kind) {
        case "automatic":
          return { kind, body: { ...base, confirm: true, payment_method_data: { card } } };
        case "manual":
          return { kind, body: { ...base, capture_method: "manual", confirm: true, payment_method_data: { card } } };
        case "customer":
          return { kind, body: { ...base, customer_id: customer.body.customer_id } };
        case "otherProfile":
          return { kind, body: { ...base, profile_id: other.profileId } };
        case "missingCustomer":
          return { kind, body: { ...base, customer_id: "cus_nobody" } };
        case "chosenId":
          return { kind, body: { ...base, payment_id: chosenId } };
      }
    });

    const responses = await Promise.all(bodies.map(({ body }) => rest(service.url, "POST", "/payments", { apiKey: merchant.apiKey, body })));

    const created: { id: string; status: string }[] = [];
    const chosen = responses.filter((_, i) => bodies[i]!.kind === "chosenId");
    expect(chosen.filter((r) => r.status === 200), summary(chosen)).toHaveLength(1);
    for (const [i, res] of responses.entries()) {
      const { kind, body } = bodies[i]!;
      if (kind === "otherProfile") {
        expect(expectRestError(res, 404, "HE_02")).toContain("profile_id");
      } else if (kind === "missingCustomer") {
        expect(expectRestError(res, 404, "HE_02")).toContain("customer_id");
      } else if (kind === "chosenId" && res.status !== 200) {
        expect(expectRestError(res, 409, "HE_01")).toContain(chosenId);
      } else {
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        expect(res.body.metadata).toEqual(body.metadata);
        expect(res.body.amount).toBe(body.amount);
        const expected = { automatic: "succeeded", manual: "requires_capture" }[kind as string] ?? "requires_payment_method";
        expect(res.body.status).toBe(expected);
        created.push({ id: res.body.payment_id, status: expected });
      }
    }

    // Exactly the answered payments exist, each as answered, with the event of its status.
    expect(await count("SELECT count(*) AS n FROM payments WHERE merchant_id = $1", [merchant.merchantId])).toBe(created.length);
    expect(await count("SELECT count(*) AS n FROM events WHERE merchant_id = $1", [merchant.merchantId])).toBe(created.length);
    expect(await count("SELECT count(*) AS n FROM payments WHERE merchant_id = $1", [other.merchantId])).toBe(0);
    expect(created.length).toBe(8 * 3 + 1);
    for (const { id, status } of created) {
      const stored = await rest(service.url, "GET", `/payments/${id}`, { apiKey: merchant.apiKey });
      expect(stored.body).toMatchObject({ status, description: awkward, metadata: { note: awkward } });
      expect(await eventTypes(merchant, id)).toEqual([`payment.${status}`]);
    }
  });

  it("the jobs of payments created together are written with each and run: manual authorizations expire after 7 days", async () => {
    const merchant = await newMerchant(service.url);
    const responses = await Promise.all(
      Array.from({ length: 20 }, () =>
        rest(service.url, "POST", "/payments", {
          apiKey: merchant.apiKey,
          body: { amount: 500, currency: "USD", profile_id: merchant.profileId, capture_method: "manual", confirm: true, payment_method_data: { card } },
        }),
      ),
    );
    for (const res of responses) expect(res.status, JSON.stringify(res.body)).toBe(200);

    clock.advance(7 * 24 * 3600 * 1000 + 1000);
    await service.jobs.runDue();

    for (const res of responses) {
      const stored = await rest(service.url, "GET", `/payments/${res.body.payment_id}`, { apiKey: merchant.apiKey });
      expect(stored.body.status).toBe("cancelled");
      expect(await eventTypes(merchant, res.body.payment_id)).toEqual(["payment.cancelled", "payment.requires_capture"]);
    }
  });
});

describe("payouts created in one burst", () => {
  it("each call gets its own answer, and the confirmed ones are sent by their jobs", async () => {
    const merchant = await newMerchant(service.url);
    const other = await newMerchant(service.url);
    const bodies = Array.from({ length: 20 }, (_, i) => ({
      amount: 100 + i,
      currency: "USD",
      profile_id: i % 4 === 3 ? other.profileId : merchant.profileId,
      confirm: i % 2 === 0,
      payout_type: "bank",
      payout_method_data: {
        bank: { bank_name: "Sandbox Bank", bank_account_number: payoutAccounts.succeeds, bank_routing_number: "110000000", bank_account_holder_name: "Ada" },
      },
    }));

    const responses = await Promise.all(bodies.map((body) => rest(service.url, "POST", "/payouts/create", { apiKey: merchant.apiKey, body })));
    await service.jobs.runDue();

    for (const [i, res] of responses.entries()) {
      if (bodies[i]!.profile_id === other.profileId) {
        expect(expectRestError(res, 404, "HE_02")).toContain("profile_id");
        continue;
      }
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.amount).toBe(bodies[i]!.amount);
      const stored = await rest(service.url, "GET", `/payouts/${res.body.payout_id}`, { apiKey: merchant.apiKey });
      expect(stored.body.status).toBe(bodies[i]!.confirm ? "success" : "requires_fulfillment");
    }
    expect(await count("SELECT count(*) AS n FROM payouts WHERE merchant_id = $1", [merchant.merchantId])).toBe(15);
  });
});
