import { describe, expect, it } from "vitest";
import { visaCard as card } from "./support/cards.js";
import { rest, type JsonBody, type RestResponse } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { onPostgres } from "./support/database.js";
import { expectRestError } from "./support/errors.js";
import { eventTypes } from "./support/events.js";
import { newMerchant, type TestMerchant } from "./support/merchant.js";
import { createPayment, retrievePayment } from "./support/payments.js";
import { summary } from "./support/races.js";
import { servicePair } from "./support/running.js";
import { noPolling, startService, type TestService } from "./support/service.js";

/*
 * Concurrent operations on the same payments, sent at once to two service instances sharing one
 * PostgreSQL database, and the job runners of both instances racing for the same due jobs. The
 * embedded database serializes every statement, so these races only exist on real PostgreSQL: the
 * blocks are skipped without DATABASE_URL (CI runs the suite on PostgreSQL too).
 */

type Instance = Pick<TestService, "url" | "app">;

/** An authorized manual-capture payment, waiting in requires_capture. */
async function authorizedPayment(url: string, merchant: TestMerchant): Promise<JsonBody> {
  const payment = await createPayment(url, merchant, { capture_method: "manual", confirm: true, payment_method_data: { card } });
  expect(payment.status).toBe("requires_capture");
  return payment;
}

/** How many jobs are still stored for a payment. */
async function jobCount(instance: Instance, merchant: TestMerchant, paymentId: string): Promise<number> {
  const rows: { n: number }[] = await instance.app.dataSource.query(
    "SELECT count(*)::int AS n FROM jobs WHERE merchant_id = $1 AND object_id = $2",
    [merchant.merchantId, paymentId],
  );
  return rows[0]!.n;
}

/** Splits the responses of racing calls into the successes and the failures. */
function outcomes(responses: RestResponse[]): { won: RestResponse[]; lost: RestResponse[] } {
  return { won: responses.filter((r) => r.status === 200), lost: responses.filter((r) => r.status !== 200) };
}

describe.skipIf(!onPostgres)("races between two instances on one PostgreSQL (PostgreSQL only: the embedded database serializes)", () => {
  const clock = new TestClock();
  // instance(i) and instance(i + 1) differ, so the racing calls of one payment land on different instances.
  const { a, b, instance } = servicePair(noPolling, clock);

  it("confirm vs cancel on requires_payment_method: exactly one wins, the loser gets IR_16, one terminal event", async () => {
    const merchant = await newMerchant(a.url);
    const trials = 20;
    const payments = await Promise.all(Array.from({ length: trials }, (_, i) => createPayment(instance(i).url, merchant)));
    for (const payment of payments) expect(payment.status).toBe("requires_payment_method");

    const raced = await Promise.all(
      payments.map(async (payment, i) => {
        const [confirm, cancel] = await Promise.all([
          rest(instance(i).url, "POST", `/payments/${payment.payment_id}/confirm`, {
            apiKey: merchant.apiKey,
            body: { payment_method_data: { card } },
          }),
          rest(instance(i + 1).url, "POST", `/payments/${payment.payment_id}/cancel`, {
            apiKey: merchant.apiKey,
            body: { cancellation_reason: "race" },
          }),
        ]);
        return { payment, confirm, cancel };
      }),
    );

    for (const { payment, confirm, cancel } of raced) {
      const { won, lost } = outcomes([confirm, cancel]);
      expect(won, summary([confirm, cancel])).toHaveLength(1);
      expectRestError(lost[0]!, 400, "IR_16");
      const expected = won[0] === confirm ? "succeeded" : "cancelled";
      expect(won[0]!.body.status).toBe(expected);

      const stored = await retrievePayment(b.url, merchant, payment.payment_id);
      expect(stored.status).toBe(expected);
      if (expected === "succeeded") {
        expect(stored.amount_received).toBe(5000);
      } else {
        expect(stored.cancellation_reason).toBe("race");
        expect(stored.amount_received ?? null).toBeNull();
      }
      expect(await eventTypes(a.app.dataSource, merchant, payment.payment_id)).toEqual(
        ["payment.requires_payment_method", `payment.${expected}`].sort(),
      );
    }
  });

  it("capture vs cancel on requires_capture: exactly one wins, the loser gets IR_14 or IR_16, amounts agree", async () => {
    const merchant = await newMerchant(a.url);
    const trials = 20;
    const payments = await Promise.all(Array.from({ length: trials }, (_, i) => authorizedPayment(instance(i).url, merchant)));

    const raced = await Promise.all(
      payments.map(async (payment, i) => {
        const [capture, cancel] = await Promise.all([
          rest(instance(i).url, "POST", `/payments/${payment.payment_id}/capture`, { apiKey: merchant.apiKey, body: {} }),
          rest(instance(i + 1).url, "POST", `/payments/${payment.payment_id}/cancel`, { apiKey: merchant.apiKey, body: {} }),
        ]);
        return { payment, capture, cancel };
      }),
    );

    for (const { payment, capture, cancel } of raced) {
      const { won } = outcomes([capture, cancel]);
      expect(won, summary([capture, cancel])).toHaveLength(1);
      const captured = won[0] === capture;
      // A capture that lost finds the payment cancelled (IR_14); a cancel that lost finds it succeeded (IR_16).
      if (captured) expectRestError(cancel, 400, "IR_16");
      else expectRestError(capture, 400, "IR_14");

      const stored = await retrievePayment(a.url, merchant, payment.payment_id);
      expect(stored).toMatchObject({ status: captured ? "succeeded" : "cancelled", amount_capturable: 0 });
      expect(stored.amount_received ?? null).toBe(captured ? 5000 : null);
      expect(won[0]!.body).toMatchObject({ status: stored.status, amount_capturable: 0 });
      expect(await eventTypes(b.app.dataSource, merchant, payment.payment_id)).toEqual(
        ["payment.requires_capture", captured ? "payment.succeeded" : "payment.cancelled"].sort(),
      );
      expect(await jobCount(a, merchant, payment.payment_id)).toBe(0);
    }
  });

  it("ten concurrent captures of one payment: exactly one succeeds with its amount, the others get IR_14", async () => {
    const merchant = await newMerchant(a.url);
    for (let trial = 0; trial < 5; trial++) {
      const payment = await authorizedPayment(a.url, merchant);
      // Each capture asks for a different partial amount, so the result shows whose capture won.
      const amounts = Array.from({ length: 10 }, (_, i) => 1000 + i);
      const responses = await Promise.all(
        amounts.map((amount, i) =>
          rest(instance(i).url, "POST", `/payments/${payment.payment_id}/capture`, {
            apiKey: merchant.apiKey,
            body: { amount_to_capture: amount },
          }),
        ),
      );

      const { won, lost } = outcomes(responses);
      expect(won, summary(responses)).toHaveLength(1);
      for (const loser of lost) expectRestError(loser, 400, "IR_14");
      const winnerAmount = amounts[responses.indexOf(won[0]!)];
      expect(won[0]!.body).toMatchObject({ status: "succeeded", amount_received: winnerAmount, amount_capturable: 0 });

      const stored = await retrievePayment(b.url, merchant, payment.payment_id);
      expect(stored).toMatchObject({ status: "succeeded", amount_received: winnerAmount, amount_capturable: 0 });
      expect(await eventTypes(a.app.dataSource, merchant, payment.payment_id)).toEqual(["payment.requires_capture", "payment.succeeded"]);
    }
  });

  it("twenty concurrent metadata updates of one payment: every key survives (no lost update)", async () => {
    const merchant = await newMerchant(a.url);
    const payment = await createPayment(a.url, merchant, { metadata: { original: "kept" } });
    const keys = Array.from({ length: 20 }, (_, i) => `key_${i}`);

    const responses = await Promise.all(
      keys.map((key, i) =>
        rest(instance(i).url, "POST", `/payments/${payment.payment_id}`, {
          apiKey: merchant.apiKey,
          body: { metadata: { [key]: `value_${i}` } },
        }),
      ),
    );
    responses.forEach((res, i) => {
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.metadata).toMatchObject({ original: "kept", [keys[i]!]: `value_${i}` });
    });

    const expected = Object.fromEntries([["original", "kept"], ...keys.map((key, i) => [key, `value_${i}`])]);
    expect((await retrievePayment(a.url, merchant, payment.payment_id)).metadata).toEqual(expected);
    expect((await retrievePayment(b.url, merchant, payment.payment_id)).metadata).toEqual(expected);
    // The last of the twenty updates saw every other key, so one response carries all of them.
    expect(responses.some((res) => Object.keys(res.body.metadata).length === keys.length + 1)).toBe(true);
  });

  it("one caller-chosen payment_id sent six times at once to both instances: one payment, one event, five 409 HE_01", async () => {
    const merchant = await newMerchant(a.url);
    const stamp = Date.now();
    const ids = Array.from({ length: 10 }, (_, i) => `order_${stamp}_${i}`);
    const sends = ids.flatMap((id) => Array.from({ length: 6 }, (_, i) => ({ id, amount: 1000 + i, instance: instance(i) })));

    const responses = await Promise.all(
      sends.map(({ id, amount, instance }) =>
        rest(instance.url, "POST", "/payments", {
          apiKey: merchant.apiKey,
          body: { payment_id: id, amount, currency: "USD", profile_id: merchant.profileId, confirm: true, payment_method_data: { card } },
        }),
      ),
    );

    for (const id of ids) {
      const answers = responses.filter((_, i) => sends[i]!.id === id);
      const winners = answers.filter((res) => res.status === 200);
      expect(winners, summary(answers)).toHaveLength(1);
      for (const res of answers.filter((r) => r.status !== 200)) expect(expectRestError(res, 409, "HE_01")).toContain(id);
      const stored = await retrievePayment(b.url, merchant, id);
      expect(stored).toMatchObject({ status: "succeeded", amount: winners[0]!.body.amount });
      expect(await eventTypes(a.app.dataSource, merchant, id)).toEqual(["payment.succeeded"]);
    }
  });

  it("scheduled captures run once when both instances' job runners race for them", async () => {
    const merchant = await newMerchant(a.url);
    const captureOn = new Date(clock.now().getTime() + 60_000).toISOString();
    const payments = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        createPayment(instance(i).url, merchant, {
          amount: 2000 + i,
          capture_method: "scheduled",
          capture_on: captureOn,
          confirm: true,
          payment_method_data: { card },
        }),
      ),
    );
    for (const payment of payments) expect(payment.status).toBe("requires_capture");

    // Not due yet: the runners leave them alone.
    await Promise.all([a.jobs.runDue(), b.jobs.runDue()]);
    for (const payment of payments) expect((await retrievePayment(a.url, merchant, payment.payment_id)).status).toBe("requires_capture");

    clock.advance(120_000);
    await Promise.all([a.jobs.runDue(), b.jobs.runDue(), a.jobs.runDue(), b.jobs.runDue()]);

    for (const [i, payment] of payments.entries()) {
      const stored = await retrievePayment(instance(i + 1).url, merchant, payment.payment_id);
      expect(stored).toMatchObject({ status: "succeeded", amount_received: 2000 + i, amount_capturable: 0 });
      expect(await eventTypes(a.app.dataSource, merchant, payment.payment_id)).toEqual(["payment.requires_capture", "payment.succeeded"]);
      expect(await jobCount(b, merchant, payment.payment_id)).toBe(0);
    }
  });
});

describe.skipIf(!onPostgres)("durable jobs across a restart (PostgreSQL only: the embedded test database is in memory)", () => {
  it("a scheduled capture created before a restart runs on the instance started after it", async () => {
    const clock = new TestClock();
    const before = await startService(noPolling, clock);
    let merchant: TestMerchant;
    let payment: JsonBody;
    try {
      merchant = await newMerchant(before.url);
      payment = await createPayment(before.url, merchant, {
        capture_method: "scheduled",
        capture_on: new Date(clock.now().getTime() + 60_000).toISOString(),
        confirm: true,
        payment_method_data: { card },
      });
      expect(payment.status).toBe("requires_capture");
    } finally {
      await before.close();
    }

    const after = await startService(noPolling, clock);
    try {
      expect((await retrievePayment(after.url, merchant, payment.payment_id)).status).toBe("requires_capture");
      clock.advance(120_000);
      await after.jobs.runDue();
      expect(await retrievePayment(after.url, merchant, payment.payment_id)).toMatchObject({
        status: "succeeded",
        amount_received: 5000,
        amount_capturable: 0,
      });
      expect(await eventTypes(after.app.dataSource, merchant, payment.payment_id)).toEqual([
        "payment.requires_capture",
        "payment.succeeded",
      ]);
      expect(await jobCount(after, merchant, payment.payment_id)).toBe(0);
    } finally {
      await after.close();
    }
  });
});
