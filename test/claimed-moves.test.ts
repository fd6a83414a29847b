import { describe, expect, it } from "vitest";
import { visaCard as card } from "./support/cards.js";
import { rest, type RestResponse } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { expectRestError } from "./support/errors.js";
import { eventTypes as storedEventTypes } from "./support/events.js";
import { newMerchant, type TestMerchant } from "./support/merchant.js";
import { createPayment } from "./support/payments.js";
import { summary } from "./support/races.js";
import { runningService } from "./support/running.js";
import { noPolling } from "./support/service.js";

/*
 * Confirms, captures and cancels made at the same moment share their claims and their outcomes'
 * statements (docs/architecture.md, "Batches"). Whatever its neighbours do, each call must get its
 * own answer and leave exactly its own rows: these tests send mixed bursts at one instance, on both
 * databases.
 */

const clock = new TestClock();
const service = runningService(noPolling, clock);

const declinedCard = { ...card, card_number: "4000000000000002" };

async function count(sql: string, params: unknown[]): Promise<number> {
  const [row] = await service.app.dataSource.query(sql, params);
  return Number(row.n);
}

/** The event types stored for an object, sorted. */
const eventTypes = (merchant: TestMerchant, objectId: string): Promise<string[]> =>
  storedEventTypes(service.app.dataSource, merchant, objectId);

/** The payment's pending jobs, by kind. */
async function jobKinds(merchant: TestMerchant, paymentId: string): Promise<string[]> {
  const rows: { kind: string }[] = await service.app.dataSource.query(
    "SELECT kind FROM jobs WHERE merchant_id = $1 AND object_id = $2 ORDER BY kind",
    [merchant.merchantId, paymentId],
  );
  return rows.map((row) => row.kind);
}

const post = (merchant: TestMerchant, path: string, body: unknown): Promise<RestResponse> =>
  rest(service.url, "POST", path, { apiKey: merchant.apiKey, body });

describe("moves made in one burst", () => {
  it("each call gets its own answer: others' declined card, missing payment, wrong status or lost race fail only themselves", async () => {
    const merchant = await newMerchant(service.url);
    const open = await Promise.all(Array.from({ length: 24 }, () => createPayment(service.url, merchant)));
    const authorized = await Promise.all(
      Array.from({ length: 12 }, () =>
        createPayment(service.url, merchant, {
          capture_method: "manual",
          confirm: true,
          payment_method: "card",
          payment_method_data: { card },
        }),
      ),
    );
    const contested = open[0]!.payment_id as string;
    type Kind = "confirm" | "declined" | "contested" | "missing" | "alreadyDone" | "capture" | "cancel";
    const calls: { kind: Kind; paymentId: string; send: () => Promise<RestResponse> }[] = [
      ...open.slice(1, 13).map((p, i) => ({
        kind: (i % 3 === 0 ? "declined" : "confirm") as Kind,
        paymentId: p.payment_id as string,
        send: () =>
          post(merchant, `/payments/${p.payment_id}/confirm`, { payment_method_data: { card: i % 3 === 0 ? declinedCard : card } }),
      })),
      ...[0, 1, 2, 3].map(() => ({
        kind: "contested" as Kind,
        paymentId: contested,
        send: () => post(merchant, `/payments/${contested}/confirm`, { payment_method_data: { card } }),
      })),
      ...[0, 1].map((i) => ({
        kind: "missing" as Kind,
        paymentId: `pay_missing${i}`,
        send: () => post(merchant, `/payments/pay_missing${i}/confirm`, { payment_method_data: { card } }),
      })),
      ...authorized.slice(0, 6).map((p) => ({
        kind: "capture" as Kind,
        paymentId: p.payment_id as string,
        send: () => post(merchant, `/payments/${p.payment_id}/capture`, {}),
      })),
      ...authorized.slice(6).map((p) => ({
        kind: "cancel" as Kind,
        paymentId: p.payment_id as string,
        send: () => post(merchant, `/payments/${p.payment_id}/cancel`, { cancellation_reason: "duplicate" }),
      })),
      ...authorized.slice(0, 2).map((p) => ({
        kind: "alreadyDone" as Kind,
        paymentId: p.payment_id as string,
        // Confirming an authorized payment is refused whether its capture, in the same burst, came first or not.
        send: () => post(merchant, `/payments/${p.payment_id}/confirm`, { payment_method_data: { card } }),
      })),
    ];

    const responses = await Promise.all(calls.map((call) => call.send()));

    const contestedAnswers = responses.filter((_, i) => calls[i]!.kind === "contested");
    expect(
      contestedAnswers.filter((r) => r.status === 200),
      summary(contestedAnswers),
    ).toHaveLength(1);
    for (const [i, res] of responses.entries()) {
      const { kind, paymentId } = calls[i]!;
      const expected = { confirm: "succeeded", declined: "failed", capture: "succeeded", cancel: "cancelled" } as Record<Kind, string>;
      if (kind === "missing") {
        expect(expectRestError(res, 404, "HE_02")).toContain(paymentId);
      } else if (kind === "alreadyDone") {
        expectRestError(res, 400, "IR_16");
      } else if (kind === "contested") {
        if (res.status !== 200) expectRestError(res, 400, "IR_16");
        else expect(res.body.status).toBe("succeeded");
      } else {
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        expect(res.body).toMatchObject({ payment_id: paymentId, status: expected[kind] });
      }
    }

    // Each payment is as its call answered, with one event per status it entered and no claim left.
    const entered: Record<Kind, string[]> = {
      confirm: ["requires_payment_method", "succeeded"],
      declined: ["requires_payment_method", "failed"],
      contested: ["requires_payment_method", "succeeded"],
      capture: ["requires_capture", "succeeded"],
      cancel: ["requires_capture", "cancelled"],
      missing: [],
      alreadyDone: [],
    };
    for (const [i, call] of calls.entries()) {
      if (entered[call.kind].length === 0 || responses[i]!.status !== 200) continue;
      const stored = await rest(service.url, "GET", `/payments/${call.paymentId}`, { apiKey: merchant.apiKey });
      expect(stored.body.status).toBe(responses[i]!.body.status);
      expect(await eventTypes(merchant, call.paymentId)).toEqual(entered[call.kind].map((status) => `payment.${status}`).sort());
    }
    expect(
      await count("SELECT count(*) AS n FROM payments WHERE merchant_id = $1 AND claim_token IS NOT NULL", [merchant.merchantId]),
    ).toBe(0);
  });

  it("authorizations confirmed together each get their expiry job, and cancels made together end them", async () => {
    const merchant = await newMerchant(service.url);
    const open = await Promise.all(Array.from({ length: 16 }, () => createPayment(service.url, merchant, { capture_method: "manual" })));
    const confirmed = await Promise.all(
      open.map((p) => post(merchant, `/payments/${p.payment_id}/confirm`, { payment_method_data: { card } })),
    );
    for (const res of confirmed) expect(res.body.status, JSON.stringify(res.body)).toBe("requires_capture");
    for (const p of open) expect(await jobKinds(merchant, p.payment_id as string)).toEqual(["payment.expire_authorization"]);

    const cancelled = await Promise.all(open.slice(0, 8).map((p) => post(merchant, `/payments/${p.payment_id}/cancel`, {})));
    for (const res of cancelled) expect(res.body.status, JSON.stringify(res.body)).toBe("cancelled");
    for (const [i, p] of open.entries()) {
      expect(await jobKinds(merchant, p.payment_id as string)).toEqual(i < 8 ? [] : ["payment.expire_authorization"]);
    }

    // The authorizations left expire on the runner after 7 days, each once.
    clock.advance(7 * 86_400_000 + 1000);
    await service.jobs.runDue();
    for (const [i, p] of open.entries()) {
      const stored = await rest(service.url, "GET", `/payments/${p.payment_id}`, { apiKey: merchant.apiKey });
      expect(stored.body.status).toBe("cancelled");
      expect(await eventTypes(merchant, p.payment_id as string)).toEqual([
        "payment.cancelled",
        "payment.requires_capture",
        "payment.requires_payment_method",
      ]);
      expect(await jobKinds(merchant, p.payment_id as string), `payment ${i}`).toEqual([]);
    }
  });
});
