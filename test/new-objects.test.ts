import { describe, expect, it } from "vitest";
import { createContextValues } from "@connectrpc/connect";
import { visaCard as card } from "./support/cards.js";
import { rest } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { expectRestError } from "./support/errors.js";
import { eventTypes as storedEventTypes } from "./support/events.js";
import { newMerchant, type TestMerchant } from "./support/merchant.js";
import { payoutAccounts } from "./support/payout-destinations.js";
import { summary } from "./support/races.js";
import { runningService } from "./support/running.js";
import { noPolling } from "./support/service.js";
import { PaymentRow } from "../src/payments/payment.entity.js";
import { paymentResource } from "../src/payments/store.js";
import { responseRecorderKey } from "../src/db/unit-of-work.js";

/*
 * Payments and payouts that calls create at the same moment reach the database together, in one
 * statement (docs/architecture.md, "Writing new objects"). Whatever its neighbours do, each call
 * must get its own answer and leave exactly its own rows: these tests send mixed bursts at one
 * instance, on both databases.
 */

/** Text that an array literal must escape: quotes, braces, commas, backslashes, the word NULL. */
const awkward = 'a "quoted", {braced} \\ back\\slash NULL é 💳';

const clock = new TestClock();
const service = runningService(noPolling, clock);

async function count(sql: string, params: unknown[]): Promise<number> {
  const [row] = await service.app.dataSource.query(sql, params);
  return Number(row.n);
}

/** The event types stored for an object, sorted. */
const eventTypes = (merchant: TestMerchant, objectId: string): Promise<string[]> =>
  storedEventTypes(service.app.dataSource, merchant, objectId);

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
      const base = {
        amount: 1000 + i,
        currency: "USD",
        profile_id: merchant.profileId,
        description: awkward,
        metadata: { index: String(i), note: awkward },
      };
      const bodyOf = {
        automatic: { ...base, confirm: true, payment_method_data: { card } },
        manual: { ...base, capture_method: "manual", confirm: true, payment_method_data: { card } },
        customer: { ...base, customer_id: customer.body.customer_id },
        otherProfile: { ...base, profile_id: other.profileId },
        missingCustomer: { ...base, customer_id: "cus_nobody" },
        chosenId: { ...base, payment_id: chosenId },
      };
      return { kind, body: bodyOf[kind] };
    });

    const responses = await Promise.all(
      bodies.map(({ body }) => rest(service.url, "POST", "/payments", { apiKey: merchant.apiKey, body })),
    );

    const created: { id: string; status: string }[] = [];
    const chosen = responses.filter((_, i) => bodies[i]!.kind === "chosenId");
    expect(
      chosen.filter((r) => r.status === 200),
      summary(chosen),
    ).toHaveLength(1);
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

  it("two calls naming one payment_id, one of them a missing customer: only the valid one is written, answered and has events and jobs", async () => {
    const merchant = await newMerchant(service.url);
    const stamp = Date.now();
    const pairs = Array.from({ length: 12 }, (_, i) => ({
      id: `order_${stamp}_${i}`,
      valid: {
        amount: 700 + i,
        currency: "USD",
        profile_id: merchant.profileId,
        capture_method: "manual",
        confirm: true,
        payment_method_data: { card },
      },
      refused: { amount: 9000 + i, currency: "USD", profile_id: merchant.profileId, customer_id: "cus_nobody" },
    }));
    // Whichever of a pair reaches the writer first, the refused one is refused (the guard comes before
    // the id) and the valid one finds the id free: it never shares a batch with its twin.
    const sends = pairs.flatMap(({ id, valid, refused }) => [
      rest(service.url, "POST", "/payments", { apiKey: merchant.apiKey, body: { ...refused, payment_id: id } }),
      rest(service.url, "POST", "/payments", { apiKey: merchant.apiKey, body: { ...valid, payment_id: id } }),
    ]);
    const responses = await Promise.all(sends);

    for (const [i, { id, valid }] of pairs.entries()) {
      expect(expectRestError(responses[2 * i]!, 404, "HE_02")).toContain("customer_id");
      const written = responses[2 * i + 1]!;
      expect(written.status, JSON.stringify(written.body)).toBe(200);
      expect(written.body).toMatchObject({ payment_id: id, amount: valid.amount, status: "requires_capture" });
      const stored = await rest(service.url, "GET", `/payments/${id}`, { apiKey: merchant.apiKey });
      expect(stored.body).toMatchObject({ amount: valid.amount, status: "requires_capture" });
      expect(stored.body.customer_id).toBeNull();
      expect(await eventTypes(merchant, id)).toEqual(["payment.requires_capture"]);
      expect(await count("SELECT count(*) AS n FROM jobs WHERE merchant_id = $1 AND object_id = $2", [merchant.merchantId, id])).toBe(1);
    }
    expect(await count("SELECT count(*) AS n FROM payments WHERE merchant_id = $1", [merchant.merchantId])).toBe(pairs.length);
  });

  it("an id taken before the burst is 409 for its calls alone, whichever batch they share", async () => {
    const merchant = await newMerchant(service.url);
    const taken = `order_${Date.now()}_taken`;
    const first = await rest(service.url, "POST", "/payments", {
      apiKey: merchant.apiKey,
      body: { payment_id: taken, amount: 100, currency: "USD", profile_id: merchant.profileId },
    });
    expect(first.status).toBe(200);
    const bodies = Array.from({ length: 30 }, (_, i) => ({
      amount: 200 + i,
      currency: "USD",
      profile_id: merchant.profileId,
      ...(i % 3 === 0 ? { payment_id: taken } : { confirm: true, payment_method_data: { card } }),
    }));

    const responses = await Promise.all(bodies.map((body) => rest(service.url, "POST", "/payments", { apiKey: merchant.apiKey, body })));

    for (const [i, res] of responses.entries()) {
      if (i % 3 === 0) {
        expect(expectRestError(res, 409, "HE_01")).toContain(taken);
      } else {
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        expect(res.body).toMatchObject({ amount: 200 + i, status: "succeeded" });
      }
    }
    const stored = await rest(service.url, "GET", `/payments/${taken}`, { apiKey: merchant.apiKey });
    expect(stored.body).toMatchObject({ amount: 100, status: "requires_payment_method" });
    expect(await eventTypes(merchant, taken)).toEqual(["payment.requires_payment_method"]);
    expect(await count("SELECT count(*) AS n FROM payments WHERE merchant_id = $1", [merchant.merchantId])).toBe(1 + 20);
  });

  it("the jobs of payments created together are written with each and run: manual authorizations expire after 7 days", async () => {
    const merchant = await newMerchant(service.url);
    const responses = await Promise.all(
      Array.from({ length: 20 }, () =>
        rest(service.url, "POST", "/payments", {
          apiKey: merchant.apiKey,
          body: {
            amount: 500,
            currency: "USD",
            profile_id: merchant.profileId,
            capture_method: "manual",
            confirm: true,
            payment_method_data: { card },
          },
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

/*
 * Calls over HTTP reach the writer over several event-loop turns, so which of them share a batch is
 * up to timing. These tests call the writer directly, all in one turn, so they share one.
 */
describe("objects written in one turn", () => {
  /** What a call without an idempotency key gives the writer. */
  const call = { values: createContextValues() };

  /** A stored payment of a new merchant, to copy rows from. */
  async function paymentTemplate(): Promise<{ merchant: TestMerchant; template: PaymentRow }> {
    const merchant = await newMerchant(service.url);
    const created = await rest(service.url, "POST", "/payments", {
      apiKey: merchant.apiKey,
      body: { amount: 100, currency: "USD", profile_id: merchant.profileId },
    });
    const template = await service.app.dataSource
      .getRepository(PaymentRow)
      .findOneByOrFail({ merchantId: merchant.merchantId, paymentId: created.body.payment_id });
    return { merchant, template };
  }

  it("five with one payment_id: exactly one is written, with one event; the others are HE_01", async () => {
    const { merchant, template } = await paymentTemplate();
    const id = `${template.paymentId}_same`;
    const rows = Array.from({ length: 5 }, (_, i) => Object.assign(new PaymentRow(), template, { paymentId: id, amount: BigInt(500 + i) }));

    const outcomes = await Promise.allSettled(rows.map((row) => service.app.writer.create(call, paymentResource, row, [])));

    const written = outcomes.flatMap((outcome, i) => (outcome.status === "fulfilled" && outcome.value ? [i] : []));
    expect(written).toHaveLength(1);
    for (const outcome of outcomes.filter((_, i) => i !== written[0])) {
      expect(outcome.status).toBe("rejected");
      expect((outcome as PromiseRejectedResult).reason).toMatchObject({ code: "HE_01" });
    }
    const stored = await rest(service.url, "GET", `/payments/${id}`, { apiKey: merchant.apiKey });
    expect(stored.body.amount).toBe(500 + written[0]!);
    expect(await eventTypes(merchant, id)).toEqual(["payment.requires_payment_method"]);
  });

  it("a batch the database rejects is written again object by object: only the object no check caught fails", async () => {
    // The API validates everything PostgreSQL would reject, so one row here breaks a column type (a
    // four-letter currency in char(3)), which must be an error, not a currency cut to three letters.
    const { merchant, template } = await paymentTemplate();
    const rows = Array.from({ length: 10 }, (_, i) =>
      Object.assign(new PaymentRow(), template, { paymentId: `${template.paymentId}_${i}`, currency: i === 3 ? "USDX" : "USD" }),
    );

    const outcomes = await Promise.allSettled(rows.map((row) => service.app.writer.create(call, paymentResource, row, [])));

    for (const [i, outcome] of outcomes.entries()) {
      if (i === 3) {
        expect(outcome.status).toBe("rejected");
        expect(String((outcome as PromiseRejectedResult).reason)).toContain("character(3)");
      } else {
        expect(outcome).toMatchObject({ status: "fulfilled", value: { paymentId: rows[i]!.paymentId } });
        expect(await eventTypes(merchant, rows[i]!.paymentId)).toEqual(["payment.requires_payment_method"]);
      }
    }
    expect(await count("SELECT count(*) AS n FROM payments WHERE merchant_id = $1", [merchant.merchantId])).toBe(1 + 9);
  });

  it("with their calls' idempotency keys: each key is completed with its call's answer in the statement that writes its object; a key a retry took over writes neither", async () => {
    const { merchant, template } = await paymentTemplate();
    const keys = Array.from({ length: 5 }, (_, i) => `${template.paymentId}_key${i}`);
    // Each call holds its key under its own claim token, except the third, whose key a retry has taken over.
    for (const [i, key] of keys.entries()) {
      await service.app.dataSource.query(
        `INSERT INTO idempotency_keys (merchant_id, livemode, idempotency_key, fingerprint, state, claim_token, locked_until, response, created, expires_at, claimed_by, effect_seed)
         VALUES ($1, false, $2, '\\x00', 'in_flight', $3, now() + interval '1 minute', NULL, now(), now() + interval '1 day', NULL, 'seed')`,
        [merchant.merchantId, key, i === 2 ? "the retry's token" : `token${i}`],
      );
    }
    const calls = keys.map((key, i) => {
      const values = createContextValues();
      values.set(responseRecorderKey, {
        record: () => Promise.reject(new Error("a new object's call is answered in its statement")),
        answer: () => ({
          merchantId: merchant.merchantId,
          livemode: false,
          key,
          claimToken: `token${i}`,
          response: Buffer.from(`answer ${i}`),
        }),
        keepForRetry: () => undefined,
      });
      return { values };
    });
    const rows = keys.map((_, i) => Object.assign(new PaymentRow(), template, { paymentId: `${template.paymentId}_${i}` }));

    const outcomes = await Promise.allSettled(rows.map((row, i) => service.app.writer.create(calls[i]!, paymentResource, row, [])));

    const stored = await service.app.dataSource.query(
      "SELECT idempotency_key, state, convert_from(response, 'UTF8') AS response FROM idempotency_keys WHERE merchant_id = $1 ORDER BY idempotency_key",
      [merchant.merchantId],
    );
    for (const [i, outcome] of outcomes.entries()) {
      const written = await count("SELECT count(*) AS n FROM payments WHERE merchant_id = $1 AND payment_id = $2", [
        merchant.merchantId,
        rows[i]!.paymentId,
      ]);
      if (i === 2) {
        expect(outcome.status).toBe("rejected");
        expect((outcome as PromiseRejectedResult).reason).toMatchObject({ code: "IK_01" });
        expect(written).toBe(0);
        expect(stored[i]).toEqual({ idempotency_key: keys[i], state: "in_flight", response: null });
      } else {
        expect(outcome).toMatchObject({ status: "fulfilled", value: { paymentId: rows[i]!.paymentId } });
        expect(written).toBe(1);
        expect(stored[i]).toEqual({ idempotency_key: keys[i], state: "completed", response: `answer ${i}` });
      }
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
        bank: {
          bank_name: "Sandbox Bank",
          bank_account_number: payoutAccounts.succeeds,
          bank_routing_number: "110000000",
          bank_account_holder_name: "Ada",
        },
      },
    }));

    const responses = await Promise.all(
      bodies.map((body) => rest(service.url, "POST", "/payouts/create", { apiKey: merchant.apiKey, body })),
    );
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
