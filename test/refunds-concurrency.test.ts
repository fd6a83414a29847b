import { describe, expect, it } from "vitest";
import { visaCard as card } from "./support/cards.js";
import { rest, type JsonBody } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { onPostgres } from "./support/database.js";
import { expectRestError } from "./support/errors.js";
import { eventTypes } from "./support/events.js";
import { newMerchant, type TestMerchant } from "./support/merchant.js";
import { createPayment } from "./support/payments.js";
import { deadlocks, summary } from "./support/races.js";
import { servicePair } from "./support/running.js";
import { noPolling } from "./support/service.js";
import { waitUntil } from "./support/wait.js";

/*
 * Concurrent refunds of the same payments, sent at once to two service instances sharing one
 * PostgreSQL database, and a cancel racing the job runners for a due scheduled refund. The embedded
 * database serializes every statement, so these races only exist on real PostgreSQL: the block is
 * skipped without DATABASE_URL.
 */

/** Scheduled refunds wait this long by default (SCHEDULED_REFUND_DELAY_SECONDS). */
const scheduledDelayMs = 60_000;

describe.skipIf(!onPostgres)(
  "refund races between two instances on one PostgreSQL (PostgreSQL only: the embedded database serializes)",
  () => {
    const clock = new TestClock();
    const { a, b, instance } = servicePair(noPolling, clock);

    async function paidPayment(merchant: TestMerchant, amount: number): Promise<string> {
      const payment = await createPayment(a.url, merchant, { amount, confirm: true, payment_method_data: { card } });
      expect(payment.status).toBe("succeeded");
      return payment.payment_id;
    }

    /** Every refund of a payment, through the list API (one page of up to 100). */
    async function refundsOf(merchant: TestMerchant, paymentId: string): Promise<JsonBody[]> {
      const res = await rest(b.url, "POST", "/refunds/list", { apiKey: merchant.apiKey, body: { payment_id: paymentId, limit: 100 } });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.has_more).toBe(false);
      return res.body.data;
    }

    /** How many events of `type` exist for the refunds of a payment. */
    async function refundEvents(merchant: TestMerchant, paymentId: string, type: string): Promise<number> {
      const rows: { n: number }[] = await a.app.dataSource.query(
        "SELECT count(*)::int AS n FROM events WHERE merchant_id = $1 AND type = $2 AND data->'object'->>'payment_id' = $3",
        [merchant.merchantId, type, paymentId],
      );
      return rows[0]!.n;
    }

    it("50 concurrent refunds of 30 on a payment of 1000 over both instances: exactly 33 succeed, 17 get IR_13", async () => {
      const merchant = await newMerchant(a.url);
      for (let trial = 0; trial < 4; trial++) {
        const paymentId = await paidPayment(merchant, 1000);
        const responses = await Promise.all(
          Array.from({ length: 50 }, (_, i) =>
            rest(instance(i).url, "POST", "/refunds", { apiKey: merchant.apiKey, body: { payment_id: paymentId, amount: 30 } }),
          ),
        );

        const won = responses.filter((r) => r.status === 200);
        const lost = responses.filter((r) => r.status !== 200);
        expect({ won: won.length, lost: lost.length }, summary(responses)).toEqual({ won: 33, lost: 17 });
        for (const loser of lost) expectRestError(loser, 400, "IR_13");
        for (const winner of won) expect(winner.body).toMatchObject({ payment_id: paymentId, amount: 30, status: "pending" });
        expect(new Set(won.map((r) => r.body.refund_id)).size).toBe(33);

        // Both instances' runners settle them; none fails, and together they never exceed the payment.
        const settled = await waitUntil(
          async () => {
            await Promise.all([a.jobs.runDue(), b.jobs.runDue()]);
            return refundsOf(merchant, paymentId);
          },
          (refunds) => refunds.every((r) => r.status !== "pending"),
        );
        expect(settled).toHaveLength(33);
        expect(settled.map((r) => r.status)).toEqual(Array(33).fill("succeeded"));
        const refunded = settled.filter((r) => r.status !== "failed" && r.status !== "cancelled").reduce((sum, r) => sum + r.amount, 0);
        expect(refunded).toBe(990);
        expect(refunded).toBeLessThanOrEqual(1000);
        expect(await refundEvents(merchant, paymentId, "refund.pending")).toBe(33);
        expect(await refundEvents(merchant, paymentId, "refund.succeeded")).toBe(33);

        // What is left (10) is still refundable, once.
        const rest10 = await rest(b.url, "POST", "/refunds", { apiKey: merchant.apiKey, body: { payment_id: paymentId } });
        expect(rest10.body).toMatchObject({ amount: 10, status: "pending" });
        expectRestError(
          await rest(a.url, "POST", "/refunds", { apiKey: merchant.apiKey, body: { payment_id: paymentId, amount: 1 } }),
          400,
          "IR_13",
        );
      }
    });

    it("cancel vs processing of a due scheduled refund: exactly one outcome wins, with exactly one final event", async () => {
      const merchant = await newMerchant(a.url);
      const deadlocksBefore = await deadlocks(a);
      for (let round = 0; round < 8; round++) {
        const refunds = await Promise.all(
          Array.from({ length: 10 }, async (_, i) => {
            const paymentId = await paidPayment(merchant, 500);
            const res = await rest(instance(i).url, "POST", "/refunds", {
              apiKey: merchant.apiKey,
              body: { payment_id: paymentId, amount: 500, refund_type: "scheduled" },
            });
            expect(res.status, JSON.stringify(res.body)).toBe(200);
            expect(res.body).toMatchObject({ status: "pending", refund_type: "scheduled" });
            return res.body;
          }),
        );

        // Due now: the cancels race both instances' runners, which are processing all of them.
        clock.advance(scheduledDelayMs + 1000);
        const [cancels] = await Promise.all([
          Promise.all(
            refunds.map((r, i) => rest(instance(i + 1).url, "POST", `/refunds/${r.refund_id}/cancel`, { apiKey: merchant.apiKey })),
          ),
          a.jobs.runDue(),
          b.jobs.runDue(),
        ]);
        // Whatever a runner may have left behind runs now; a cancelled refund must not move.
        await Promise.all([a.jobs.runDue(), b.jobs.runDue()]);

        for (const [i, refund] of refunds.entries()) {
          const cancel = cancels[i]!;
          const stored = await rest(instance(i).url, "GET", `/refunds/${refund.refund_id}`, { apiKey: merchant.apiKey });
          expect(stored.status).toBe(200);
          if (cancel.status === 200) {
            expect(cancel.body).toMatchObject({ refund_id: refund.refund_id, status: "cancelled" });
            expect(stored.body).toEqual(cancel.body);
          } else {
            expectRestError(cancel, 400, "IR_16");
            expect(stored.body).toMatchObject({ refund_id: refund.refund_id, status: "succeeded" });
          }
          expect(await eventTypes(b.app.dataSource, merchant, refund.refund_id)).toEqual(
            ["refund.pending", `refund.${stored.body.status}`].sort(),
          );
        }
      }
      // A deadlock aborts one side: a cancel answered 500 (seen above), or a runner's job silently put
      // off for a retry. Operators see either in PostgreSQL's log; neither may happen.
      expect(await deadlocks(a)).toBe(deadlocksBefore);
    });
  },
);
