import { randomInt } from "node:crypto";
import { describe, expect, it } from "vitest";
import { mergeBalanceTotals } from "../src/ledger/totals.js";
import { verifyLedger } from "../src/ledger/verify.js";
import { cardData } from "./support/cards.js";
import { rest, type JsonBody, type RestResponse } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { onPostgres, rows } from "./support/database.js";
import { expectRestError } from "./support/errors.js";
import { newMerchant, updateProfile, type TestMerchant } from "./support/merchant.js";
import { payoutAccounts, payoutBodies, payoutCards } from "./support/payout-destinations.js";
import { deadlocks, summary } from "./support/races.js";
import { servicePair } from "./support/running.js";
import { noPolling } from "./support/service.js";
import { waitUntil } from "./support/wait.js";

/*
 * The ledger (issue 42, decisions §11) under concurrency: two service instances on one PostgreSQL
 * database take a random mix of captures (automatic, manual, partial, racing captures), refunds
 * (a burst of partial refunds racing on one payment across both instances, and refunds of other
 * payments), disputes (opened, accepted, won, lost, decisions racing), payouts (sent, declined,
 * failed over, held then cancelled, fulfill racing cancel), moves of the service's clock across an
 * hour (so the runners merge the running totals as they go), merges of the running totals from
 * both instances' data sources and verifyLedger's snapshots, all at once. Then every balance
 * transaction must be the one the objects as the API shows them imply (priced from the merchant's
 * profile), verifyLedger must find nothing, and GET /balance on either instance must equal the
 * transactions' net, split into available and pending as the transactions' own statuses say, at
 * several times around their available_on. A second test merges the running totals from both
 * instances in a loop while payments are written, and reads the balance meanwhile.
 *
 * The mix is drawn from a seeded PRNG: the seed is in the test's name, and LEDGER_SEED=<seed> draws
 * the same operations again (their interleaving is the database's). Single-instance rules are
 * test/ledger.test.ts's. The embedded database serializes every statement, so these races only exist
 * on real PostgreSQL: the block is skipped without DATABASE_URL.
 */

const seed = seedOf(process.env.LEDGER_SEED);

/** LEDGER_SEED when it is set, a random seed otherwise. */
function seedOf(value: string | undefined): number {
  if (value === undefined || value === "") return randomInt(2 ** 31);
  const parsed = Number(value);
  if (!Number.isSafeInteger(parsed)) throw new Error(`LEDGER_SEED must be an integer, not ${JSON.stringify(value)}`);
  return parsed;
}

/** A small seeded PRNG (mulberry32): the same seed draws the same operations. */
function prng(start: number) {
  let state = start >>> 0;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
  return {
    /** An integer in [min, max]. */
    int: (min: number, max: number): number => min + Math.floor(next() * (max - min + 1)),
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!,
    chance: (p: number): boolean => next() < p,
  };
}

type Random = ReturnType<typeof prng>;

const hour = 3_600_000;
const day = 24 * hour;

/** What a merchant's default profile charges, set before anything moves money. */
interface Pricing {
  readonly processing_fee_bps: number;
  readonly dispute_fee: number;
  readonly settlement_delay_days: number;
}

/** A balance transaction as the list endpoint shows it, reduced to what the objects decide. */
interface Expected {
  type: string;
  source_id: string;
  amount: number;
  fee: number;
  net: number;
  currency: string;
  /** available_on − created, in days. */
  delay_days: number;
}

/** decisions §11: basis points of the amount, rounded half-up. */
const processingFee = (amount: number, bps: number) => Math.floor((amount * bps + 5000) / 10000);

/** A sandbox refund of this amount fails (docs/refunds.md). */
const failingRefund = 9995;
/** A sandbox refund of this amount stays in manual_review. */
const reviewedRefund = 9996;

/** One step of the mix, drawn before anything runs. Sides are instance indexes (0 = a, 1 = b). */
type Op =
  | {
      kind: "pay";
      merchant: number;
      side: number;
      amount: number;
      currency: "USD" | "EUR";
      card: "succeeds" | "declined" | "disputed";
      /** For the dispute test card: a sandbox dispute opened at once on the other instance, racing the network's report. */
      openToo: boolean;
      refunds: RefundStep[];
    }
  | {
      kind: "manual";
      merchant: number;
      side: number;
      amount: number;
      then: "capture" | "capture_all" | "capture_race" | "leave" | "cancel";
      captures: number[];
      refunds: RefundStep[];
    }
  | {
      kind: "dispute";
      merchant: number;
      side: number;
      amount: number;
      /** Opening races a refund of the payment, or a second opening on the other instance, or neither. */
      opening: "alone" | "with_refund" | "twice";
      end: "opened" | "accepted" | "won" | "lost" | "race";
      /** For `race`: what the other instance does to the challenged dispute while this one resolves it won. */
      rival: "won" | "lost" | "accept";
    }
  | {
      kind: "payout";
      merchant: number;
      side: number;
      amount: number;
      how: "sent" | "declined" | "failover" | "bank" | "bank_closed" | "cancelled" | "fulfill_vs_cancel" | "cancel_twice";
    }
  | { kind: "burst"; refunds: RefundStep[] }
  | { kind: "tick"; ms: number }
  | { kind: "merge"; sides: number[] }
  | { kind: "balance"; merchant: number; side: number }
  | { kind: "verify"; side: number };

interface RefundStep {
  side: number;
  /** Undefined: what is left. */
  amount: number | undefined;
}

const merchantCount = 3;

/** Refunds of a payment of `received`: up to three, each at most half of it, now and then a scripted failure or review. */
function drawRefunds(random: Random, received: number): RefundStep[] {
  const count = random.pick([0, 0, 1, 1, 2, 3]);
  return Array.from({ length: count }, () => ({
    side: random.int(0, 1),
    amount:
      received >= 2 * reviewedRefund && random.chance(0.15)
        ? random.pick([failingRefund, reviewedRefund])
        : random.chance(0.1)
          ? undefined
          : random.int(1, Math.max(1, Math.floor(received / 2))),
  }));
}

function drawOp(random: Random): Op {
  const merchant = random.int(0, merchantCount - 1);
  const side = random.int(0, 1);
  const roll = random.int(1, 100);
  if (roll <= 25) {
    const amount = random.int(100, 30000);
    const card = random.pick(["succeeds", "succeeds", "succeeds", "succeeds", "succeeds", "declined", "disputed"] as const);
    return {
      kind: "pay",
      merchant,
      side,
      amount,
      currency: random.chance(0.2) ? "EUR" : "USD",
      card,
      openToo: random.chance(0.5),
      refunds: card === "succeeds" ? drawRefunds(random, amount) : [],
    };
  }
  if (roll <= 40) {
    const amount = random.int(200, 30000);
    const then = random.pick(["capture", "capture", "capture_all", "capture_race", "capture_race", "leave", "cancel"] as const);
    const captures = [random.int(1, amount), random.int(1, amount)];
    return { kind: "manual", merchant, side, amount, then, captures, refunds: drawRefunds(random, Math.min(...captures)) };
  }
  if (roll <= 55) {
    return {
      kind: "dispute",
      merchant,
      side,
      amount: random.int(1000, 30000),
      opening: random.pick(["alone", "alone", "with_refund", "twice"] as const),
      end: random.pick(["opened", "accepted", "won", "won", "lost", "race", "race"] as const),
      rival: random.pick(["won", "lost", "accept"] as const),
    };
  }
  if (roll <= 72) {
    return {
      kind: "payout",
      merchant,
      side,
      amount: random.int(100, 8000),
      how: random.pick([
        "sent",
        "sent",
        "declined",
        "failover",
        "bank",
        "bank_closed",
        "cancelled",
        "fulfill_vs_cancel",
        "cancel_twice",
      ] as const),
    };
  }
  if (roll <= 84) return { kind: "tick", ms: random.int(300, 2500) };
  if (roll <= 92) return { kind: "merge", sides: random.pick([[0], [1], [0, 1]]) };
  if (roll <= 97) return { kind: "balance", merchant, side };
  return { kind: "verify", side };
}

describe.skipIf(!onPostgres)(
  "the ledger on two instances sharing one PostgreSQL (PostgreSQL only: the embedded database serializes)",
  () => {
    // 10:59:50: the mix's clock moves cross 11:00, so transactions and their running totals fall in two hours.
    const clock = new TestClock(new Date("2026-12-01T10:59:50Z"));
    const { a, b, instance } = servicePair(noPolling, clock);
    const { cardPayout, bankPayout } = payoutBodies(() => clock.now());

    /** What a test calls, as one merchant's secret key, on the instance it names. */
    function merchantApi(merchant: TestMerchant) {
      const call = (side: number, method: string, path: string, body?: unknown): Promise<RestResponse> =>
        rest(instance(side).url, method, path, { apiKey: merchant.apiKey, body });
      return {
        merchant,
        call,
        pay: (side: number, amount: number, fields: Record<string, unknown> = {}) =>
          call(side, "POST", "/payments", {
            amount,
            currency: "USD",
            profile_id: merchant.profileId,
            confirm: true,
            payment_method: "card",
            payment_method_data: cardData("4242424242424242", clock.now()),
            ...fields,
          }),
        capture: (side: number, paymentId: string, amount?: number) =>
          call(side, "POST", `/payments/${paymentId}/capture`, amount === undefined ? {} : { amount_to_capture: amount }),
        refund: (side: number, paymentId: string, amount?: number) =>
          call(side, "POST", "/refunds", amount === undefined ? { payment_id: paymentId } : { payment_id: paymentId, amount }),
        dispute: (side: number, paymentId: string) => call(side, "POST", `/sandbox/payments/${paymentId}/dispute`),
        challenge: (side: number, disputeId: string) =>
          call(side, "POST", `/disputes/${disputeId}/evidence`, { evidence: { receipt: "Receipt #1001" } }),
        accept: (side: number, disputeId: string) => call(side, "POST", `/disputes/${disputeId}/accept`),
        resolve: (side: number, disputeId: string, outcome: "won" | "lost") =>
          call(side, "POST", `/sandbox/disputes/${disputeId}/resolve`, { outcome }),
        payout: (side: number, body: Record<string, unknown>) => call(side, "POST", "/payouts/create", body),
        balance: async (side: number) => ok(await call(side, "GET", "/balance"), "GET /balance"),
        /** Every object of a list endpoint, page by page (offset), through POST with `filters` or GET with them as the query. */
        async listAll(path: string, filters: Record<string, string> = {}, method: "GET" | "POST" = "POST"): Promise<JsonBody[]> {
          const all: JsonBody[] = [];
          for (let page = 0; ; page++) {
            const params = { ...filters, limit: "100", offset: String(all.length) };
            const res =
              method === "POST"
                ? await call(page, "POST", path, { ...filters, limit: 100, offset: all.length })
                : await call(page, "GET", `${path}?${new URLSearchParams(params)}`);
            const body = ok(res, `${method} ${path}`);
            all.push(...body.data);
            if (!body.has_more) {
              expect(all.length, `${path}: total_count`).toBe(body.total_count);
              return all;
            }
          }
        },
      };
    }

    type Api = ReturnType<typeof merchantApi>;

    function ok(res: RestResponse, what: string): JsonBody {
      expect(res.status, `${what}: ${res.status} ${JSON.stringify(res.body)}`).toBe(200);
      return res.body;
    }

    /** A REST answer that is 200, or the documented error one of `codes` (400). */
    function okOr(res: RestResponse, what: string, ...codes: ("IR_13" | "IR_14" | "IR_16")[]): boolean {
      if (res.status === 200) return true;
      expect(res.status, `${what}: ${res.status} ${JSON.stringify(res.body)}`).toBe(400);
      expect(codes, `${what}: ${JSON.stringify(res.body)}`).toContain(res.body?.error?.code);
      return false;
    }

    async function newApi(pricing: Pricing): Promise<Api> {
      const merchant = await newMerchant(a.url);
      await updateProfile(a.url, merchant, { ...pricing });
      return merchantApi(merchant);
    }

    /** Runs both instances' due jobs until no refund or payout is pending and each payment of the dispute test card has its dispute. */
    async function settle(reported: readonly string[]): Promise<void> {
      await waitUntil(
        async () => {
          await Promise.all([a.jobs.runDue(), b.jobs.runDue()]);
          const [row] = await rows<{ refunds: number; payouts: number; undisputed: number }>(
            a.app.dataSource,
            `SELECT (SELECT count(*) FROM refunds WHERE status = 'pending')::int AS refunds,
                  (SELECT count(*) FROM payouts WHERE status = 'pending')::int AS payouts,
                  (SELECT count(*) FROM payments AS p WHERE p.payment_id = ANY($1)
                      AND NOT EXISTS (SELECT 1 FROM disputes AS d WHERE d.payment_id = p.payment_id))::int AS undisputed`,
            [reported],
          );
          return row!;
        },
        (row) => row.refunds === 0 && row.payouts === 0 && row.undisputed === 0,
      );
    }

    /**
     * The balance transactions the merchant's objects imply, as the API shows the objects now, priced
     * from its profile (decisions §11's table): independent of the service's ledger code and of
     * verifyLedger's SQL.
     */
    async function impliedTransactions(api: Api, pricing: Pricing): Promise<Expected[]> {
      const [payments, refunds, disputes, payouts] = await Promise.all([
        api.listAll("/payments/list"),
        api.listAll("/refunds/list"),
        api.listAll("/disputes/list"),
        api.listAll("/payouts/list"),
      ]);
      const entry = (type: string, source_id: string, amount: number, currency: string, fee = 0, delay_days = 0): Expected => ({
        type,
        source_id,
        amount,
        fee,
        net: amount - fee,
        currency,
        delay_days,
      });
      const implied: Expected[] = [];
      for (const p of payments) {
        if (p.status === "succeeded" && (p.amount_received ?? 0) > 0) {
          implied.push(
            entry(
              "payment",
              p.payment_id,
              p.amount_received,
              p.currency,
              processingFee(p.amount_received, pricing.processing_fee_bps),
              pricing.settlement_delay_days,
            ),
          );
        }
      }
      for (const r of refunds) if (r.status === "succeeded") implied.push(entry("refund", r.refund_id, -r.amount, r.currency));
      const perPayment = new Map<string, number>();
      for (const d of disputes) {
        perPayment.set(d.payment_id, (perPayment.get(d.payment_id) ?? 0) + 1);
        implied.push(entry("dispute", d.dispute_id, -d.amount, d.currency, pricing.dispute_fee));
        if (d.status === "won")
          // It gives back the fee the dispute took (written 0 when there was none).
          implied.push(entry("dispute_reversal", d.dispute_id, d.amount, d.currency, pricing.dispute_fee === 0 ? 0 : -pricing.dispute_fee));
      }
      // One dispute per payment, however many instances opened one at once.
      expect([...perPayment.values()].filter((n) => n > 1)).toEqual([]);
      for (const p of payouts) {
        expect(["success", "failed", "cancelled"], `payout ${p.payout_id} final`).toContain(p.status);
        implied.push(entry("payout", p.payout_id, -p.amount, p.currency));
        if (p.status === "failed" || p.status === "cancelled") implied.push(entry("payout_reversal", p.payout_id, p.amount, p.currency));
      }
      return sortedTransactions(implied);
    }

    function sortedTransactions(list: Expected[]): Expected[] {
      return list.sort((x, y) => (x.source_id + x.type < y.source_id + y.type ? -1 : x.source_id + x.type > y.source_id + y.type ? 1 : 0));
    }

    /** The merchant's balance transactions as the list endpoint shows them, reduced to what the objects decide. */
    function reduced(listed: JsonBody[]): Expected[] {
      return sortedTransactions(
        listed.map((t) => ({
          type: t.type,
          source_id: t.source_id,
          amount: t.amount,
          fee: t.fee,
          net: t.net,
          currency: t.currency,
          delay_days: (new Date(t.available_on).getTime() - new Date(t.created).getTime()) / day,
        })),
      );
    }

    /**
     * GET /balance on both instances equals the listed transactions' net per currency, available as
     * the transactions that are available say, pending as the pending ones; each transaction's status
     * is its available_on against the service's clock. Returns the listed transactions.
     */
    async function expectBalanceMatchesTransactions(api: Api, context: string): Promise<JsonBody[]> {
      const listed = await api.listAll("/balance_transactions/list", {}, "GET");
      const now = clock.now().getTime();
      const sums = new Map<string, { available: number; pending: number }>();
      for (const t of listed) {
        expect(t.status, `${context}: ${t.balance_transaction_id} at ${clock.now().toISOString()}`).toBe(
          new Date(t.available_on).getTime() <= now ? "available" : "pending",
        );
        const sum = sums.get(t.currency) ?? { available: 0, pending: 0 };
        sum[t.status as "available" | "pending"] += t.net;
        sums.set(t.currency, sum);
      }
      const currencies = [...sums.keys()].sort();
      const expected = {
        available: currencies.map((currency) => ({ currency, amount: sums.get(currency)!.available })),
        pending: currencies.map((currency) => ({ currency, amount: sums.get(currency)!.pending })),
      };
      const [onA, onB] = await Promise.all([api.balance(0), api.balance(1)]);
      expect(onA, `${context}: balance on instance a at ${clock.now().toISOString()}`).toEqual(expected);
      expect(onB, `${context}: balance on instance b at ${clock.now().toISOString()}`).toEqual(expected);
      return listed;
    }

    /** What the checks need of the mix's outcomes. */
    interface Outcomes {
      /** Payments of the dispute test card: the network's report opens their dispute through a job. */
      reported: string[];
      /** Every racing refund of the one payment: what was asked, and the answer. */
      racing: { amount: number | undefined; res: RestResponse }[];
    }

    /** Runs one op of the mix, checking each answer as it comes. */
    async function runOp(op: Op, apis: readonly Api[], racingPaymentId: string, out: Outcomes): Promise<void> {
      switch (op.kind) {
        case "pay": {
          const api = apis[op.merchant]!;
          const number = { succeeds: "4242424242424242", declined: "4000000000000002", disputed: "4000000000000259" }[op.card];
          const payment = ok(
            await api.pay(op.side, op.amount, { currency: op.currency, payment_method_data: cardData(number, clock.now()) }),
            "payment",
          );
          expect(payment.status).toBe(op.card === "declined" ? "failed" : "succeeded");
          if (op.card === "disputed") {
            out.reported.push(payment.payment_id);
            // The report's job (woken on the instance that captured) and a sandbox opening race: one dispute.
            if (op.openToo) okOr(await api.dispute(op.side + 1, payment.payment_id), "open beside the report", "IR_16");
          }
          await refundAll(api, payment.payment_id, op.refunds);
          return;
        }
        case "manual": {
          const api = apis[op.merchant]!;
          const payment = ok(await api.pay(op.side, op.amount, { capture_method: "manual" }), "authorization");
          expect(payment.status).toBe("requires_capture");
          const id = payment.payment_id as string;
          if (op.then === "leave") return;
          if (op.then === "cancel") {
            expect(ok(await api.call(op.side + 1, "POST", `/payments/${id}/cancel`, {}), "cancel").status).toBe("cancelled");
            return;
          }
          if (op.then === "capture_race") {
            // Two partial captures on both instances: one wins with its amount, the other is IR_14.
            const answers = await Promise.all(op.captures.map((amount, i) => api.capture(op.side + i, id, amount)));
            const won = answers.filter((res) => okOr(res, "racing capture", "IR_14"));
            expect(won, summary(answers)).toHaveLength(1);
            expect(won[0]!.body).toMatchObject({ status: "succeeded", amount_received: op.captures[answers.indexOf(won[0]!)] });
          } else {
            const amount = op.then === "capture_all" ? undefined : op.captures[0];
            const captured = ok(await api.capture(op.side + 1, id, amount), "capture");
            expect(captured).toMatchObject({ status: "succeeded", amount_received: amount ?? op.amount });
          }
          await refundAll(api, id, op.refunds);
          return;
        }
        case "dispute":
          return disputeOp(op, apis[op.merchant]!);
        case "payout":
          return payoutOp(op, apis[op.merchant]!);
        case "burst": {
          const api = apis[1]!;
          const answers = await Promise.all(op.refunds.map(({ side, amount }) => api.refund(side, racingPaymentId, amount)));
          for (const [i, res] of answers.entries()) {
            okOr(res, "racing refund", "IR_13");
            out.racing.push({ amount: op.refunds[i]!.amount, res });
          }
          return;
        }
        case "tick":
          clock.advance(op.ms);
          return;
        case "merge": {
          // On both instances at once, one takes the merge's lock and the other skips, or they take turns.
          await Promise.all(op.sides.map((side) => mergeBalanceTotals(instance(side).app.dataSource, clock.now())));
          return;
        }
        case "balance": {
          const balance = await apis[op.merchant]!.balance(op.side);
          expect(balance.available.map((c: JsonBody) => c.currency)).toEqual(balance.pending.map((c: JsonBody) => c.currency));
          return;
        }
        case "verify": {
          // Every change writes its money in its own statement: any snapshot, taken amid the writes, adds up.
          const { differences } = await verifyLedger(instance(op.side).app.dataSource);
          expect(differences).toEqual([]);
          return;
        }
      }
    }

    /** Partial refunds of a payment at once on both instances: each 200 or, once too much is asked, IR_13. */
    async function refundAll(api: Api, paymentId: string, refunds: readonly RefundStep[]): Promise<void> {
      const answers = await Promise.all(refunds.map(({ side, amount }) => api.refund(side, paymentId, amount)));
      for (const res of answers) okOr(res, `refund of ${paymentId}`, "IR_13");
    }

    async function disputeOp(op: Extract<Op, { kind: "dispute" }>, api: Api): Promise<void> {
      const payment = ok(await api.pay(op.side, op.amount), "payment to dispute");
      const paymentId = payment.payment_id as string;
      let dispute: JsonBody;
      if (op.opening === "twice") {
        const answers = await Promise.all([api.dispute(op.side, paymentId), api.dispute(op.side + 1, paymentId)]);
        const won = answers.filter((res) => okOr(res, "racing dispute opening", "IR_16"));
        expect(won, summary(answers)).toHaveLength(1);
        dispute = won[0]!.body;
      } else if (op.opening === "with_refund") {
        // A refund racing the opening: written before it (200), or refused while the dispute is open (IR_16).
        const [opened, refund] = await Promise.all([api.dispute(op.side, paymentId), api.refund(op.side + 1, paymentId, 100)]);
        dispute = ok(opened, "dispute opening");
        okOr(refund, "refund racing a dispute opening", "IR_16");
      } else {
        dispute = ok(await api.dispute(op.side, paymentId), "dispute opening");
      }
      expect(dispute).toMatchObject({ status: "opened", amount: op.amount, payment_id: paymentId });
      const id = dispute.dispute_id as string;
      let status: string = "opened";
      if (op.end === "accepted") {
        status = ok(await api.accept(op.side + 1, id), "accept").status;
      } else if (op.end !== "opened") {
        ok(await api.challenge(op.side + 1, id), "evidence");
        if (op.end === "race") {
          // Two decisions of one challenged dispute on both instances: exactly one is taken.
          const answers = await Promise.all([
            api.resolve(op.side, id, "won"),
            op.rival === "accept" ? api.accept(op.side + 1, id) : api.resolve(op.side + 1, id, op.rival),
          ]);
          const won = answers.filter((res) => okOr(res, "racing dispute decision", "IR_16"));
          expect(won, summary(answers)).toHaveLength(1);
          status = won[0]!.body.status;
        } else {
          status = ok(await api.resolve(op.side, id, op.end), "resolve").status;
        }
      }
      // What the decision left refundable: all of it once won, nothing once lost or accepted; nothing while open.
      const refund = await api.refund(op.side + 1, paymentId, 100);
      if (status === "won") ok(refund, "refund after a won dispute");
      else expectRestError(refund, 400, status === "opened" ? "IR_16" : "IR_13");
    }

    async function payoutOp(op: Extract<Op, { kind: "payout" }>, api: Api): Promise<void> {
      const { merchant } = api;
      const bodies: Record<string, Record<string, unknown>> = {
        sent: cardPayout(merchant, payoutCards.succeeds),
        declined: cardPayout(merchant, payoutCards.declined),
        failover: cardPayout(merchant, payoutCards.instantFails, { priority: "fast" }),
        bank: bankPayout(merchant, payoutAccounts.succeeds),
        bank_closed: bankPayout(merchant, payoutAccounts.closed),
      };
      const held = op.how === "cancelled" || op.how === "fulfill_vs_cancel" || op.how === "cancel_twice";
      const body = held ? cardPayout(merchant, payoutCards.succeeds, { confirm: false }) : bodies[op.how]!;
      const payout = ok(await api.payout(op.side, { ...body, amount: op.amount }), "payout");
      expect(payout.status).toBe(held ? "requires_fulfillment" : "pending");
      const id = payout.payout_id as string;
      if (op.how === "cancelled") {
        expect(ok(await api.call(op.side + 1, "POST", `/payouts/${id}/cancel`), "payout cancel").status).toBe("cancelled");
      } else if (op.how === "fulfill_vs_cancel" || op.how === "cancel_twice") {
        const answers = await Promise.all([
          api.call(op.side, "POST", `/payouts/${id}/${op.how === "cancel_twice" ? "cancel" : "fulfill"}`),
          api.call(op.side + 1, "POST", `/payouts/${id}/cancel`),
        ]);
        const won = answers.filter((res) => okOr(res, `racing ${op.how}`, "IR_16"));
        expect(won, summary(answers)).toHaveLength(1);
      }
    }

    it(`a random mix over both instances (seed ${seed}; LEDGER_SEED=${seed} draws it again): the ledger verifies, balances are their transactions`, async () => {
      const random = prng(seed);
      const context = `seed ${seed}`;
      const deadlocksBefore = await deadlocks(a);
      const pricings: Pricing[] = [0, 1, 2].map((delay) => ({
        processing_fee_bps: random.pick([0, 175, 290, 333, 1250]),
        dispute_fee: random.pick([0, 1500, 2500]),
        settlement_delay_days: delay,
      }));
      const apis = await Promise.all(pricings.map((pricing) => newApi(pricing)));

      // The payment whose refunds race: authorized for more than is captured, so a refund is bounded by the capture.
      const racingApi = apis[1]!;
      const authorized = ok(await racingApi.pay(0, 60000, { capture_method: "manual" }), "racing payment");
      const captured = 45000;
      const racingPaymentId = authorized.payment_id as string;
      expect(ok(await racingApi.capture(1, racingPaymentId, captured), "racing capture")).toMatchObject({ amount_received: captured });

      // The mix: bursts of refunds of that payment spread among everything else, asking well beyond its
      // capture in refunds that do not fail (what a failed one held comes back), so some must be refused.
      const ops: Op[] = Array.from({ length: 260 }, () => drawOp(random));
      let asked = 0;
      while (asked <= captured * 1.6) {
        const refunds: RefundStep[] = Array.from({ length: random.int(4, 10) }, (_, i) => {
          const amount = random.chance(0.03)
            ? undefined
            : random.chance(0.05)
              ? random.pick([failingRefund, reviewedRefund])
              : random.int(300, 2500);
          asked += amount === failingRefund ? 0 : (amount ?? 0);
          return { side: i % 2, amount };
        });
        ops.splice(random.int(0, ops.length), 0, { kind: "burst", refunds });
      }

      const out: Outcomes = { reported: [], racing: [] };
      let next = 0;
      let failed = false;
      const workers = await Promise.allSettled(
        Array.from({ length: 12 }, async () => {
          while (!failed && next < ops.length) {
            const index = next++;
            const op = ops[index]!;
            try {
              await runOp(op, apis, racingPaymentId, out);
            } catch (error) {
              failed = true;
              if (error instanceof Error) error.message = `${context}, op ${index} ${JSON.stringify(op)}: ${error.message}`;
              throw error;
            }
          }
        }),
      );
      for (const worker of workers) if (worker.status === "rejected") throw worker.reason;

      await settle(out.reported);

      // Every transaction is the one the objects imply, priced from the profile; nothing else moved.
      const listed: JsonBody[][] = [];
      for (const [m, api] of apis.entries()) {
        const transactions = await expectBalanceMatchesTransactions(api, `${context}, merchant ${m}`);
        expect(reduced(transactions), `${context}, merchant ${m}: transactions as the objects imply them`).toEqual(
          await impliedTransactions(api, pricings[m]!),
        );
        listed.push(transactions);
      }
      const [first, second] = await Promise.all([verifyLedger(a.app.dataSource), verifyLedger(b.app.dataSource)]);
      expect(first.differences, context).toEqual([]);
      expect(second, context).toEqual(first);
      expect(first.transactions, context).toBe(listed.flat().length);
      expect(first.balances, context).toBe(
        new Set(listed.flatMap((transactions, m) => transactions.map((t) => `${m} ${t.currency}`))).size,
      );

      // The racing payment: the refunds answered 200 are its refunds; together they never exceed the capture.
      const refunds = await racingApi.listAll("/refunds/list", { payment_id: racingPaymentId });
      const won = out.racing.filter(({ res }) => res.status === 200);
      const lost = out.racing.filter(({ res }) => res.status !== 200);
      expect({ won: won.length > 0, lost: lost.length > 0 }, `${context}: ${summary(out.racing.map(({ res }) => res))}`).toEqual({
        won: true,
        lost: true,
      });
      expect(refunds.map((r) => r.refund_id).sort()).toEqual(won.map(({ res }) => res.body.refund_id).sort());
      const held = refunds.filter((r) => r.status !== "failed" && r.status !== "cancelled").reduce((sum, r) => sum + r.amount, 0);
      const refunded = refunds.filter((r) => r.status === "succeeded").reduce((sum, r) => sum + r.amount, 0);
      const failedBack = refunds.filter((r) => r.status === "failed").reduce((sum, r) => sum + r.amount, 0);
      expect(held, context).toBeLessThanOrEqual(captured);
      expect(refunded, context).toBeLessThanOrEqual(captured);
      // A refund refused as too much asked more than was left then, which was at least what is left now less what failed since.
      for (const { amount } of lost) {
        if (amount === undefined) expect(captured - held - failedBack, context).toBeLessThanOrEqual(0);
        else expect(amount, context).toBeGreaterThan(captured - held - failedBack);
      }
      // Exactly one refund transaction per succeeded refund, of its amount; none for the others.
      await Promise.all(
        refunds.map(async (refund, i) => {
          const res = await racingApi.call(i, "GET", `/balance_transactions/list?source_id=${refund.refund_id}&type=refund`);
          const { data } = ok(res, "refund transactions");
          expect(
            data.map((t: JsonBody) => ({ amount: t.amount, net: t.net })),
            `${context}: ${refund.refund_id} ${refund.status}`,
          ).toEqual(refund.status === "succeeded" ? [{ amount: -refund.amount, net: -refund.amount }] : []);
        }),
      );
      const payment = ok(await racingApi.call(0, "GET", `/balance_transactions/list?source_id=${racingPaymentId}`), "payment transactions");
      expect(payment.data).toMatchObject([{ type: "payment", amount: captured }]);

      // The running totals merged (by the runners on the clock's moves, by the mix's merges): nothing changes.
      const before = await Promise.all(apis.map((api) => api.balance(0)));
      await Promise.all([mergeBalanceTotals(a.app.dataSource, clock.now()), mergeBalanceTotals(b.app.dataSource, clock.now())]);
      await mergeBalanceTotals(b.app.dataSource, clock.now());
      expect(await Promise.all(apis.map((api) => api.balance(1)))).toEqual(before);
      expect((await verifyLedger(b.app.dataSource)).differences, context).toEqual([]);

      // Later, as the settlement delays run out: at a transaction's very available_on, a moment after, and an hour on.
      const pendingTimes = [
        ...new Set(
          listed
            .flat()
            .filter((t) => t.status === "pending")
            .map((t) => new Date(t.available_on).getTime()),
        ),
      ].sort((x, y) => x - y);
      expect(pendingTimes.length, context).toBeGreaterThan(0);
      const moments = [
        pendingTimes[Math.floor(pendingTimes.length / 3)]!,
        pendingTimes[Math.floor(pendingTimes.length / 3)]! + 1,
        pendingTimes[Math.floor((2 * pendingTimes.length) / 3)]!,
        pendingTimes[Math.floor((2 * pendingTimes.length) / 3)]! + hour,
        pendingTimes.at(-1)!,
        pendingTimes.at(-1)! + hour,
      ];
      for (const moment of moments) {
        if (moment < clock.now().getTime()) continue;
        clock.advance(moment - clock.now().getTime());
        for (const [m, api] of apis.entries()) await expectBalanceMatchesTransactions(api, `${context}, merchant ${m}`);
      }
      expect(await deadlocks(a)).toBe(deadlocksBefore);
    });

    it(`merging the running totals from both instances while payments are written (seed ${seed}) changes no balance`, async () => {
      const random = prng(seed ^ 0x5eed);
      const pricing: Pricing = { processing_fee_bps: 250, dispute_fee: 0, settlement_delay_days: 1 };
      const api = await newApi(pricing);
      const amounts = Array.from({ length: 90 }, () => random.int(100, 20000));

      let writing = true;
      let next = 0;
      const merges = { rounds: 0, merged: 0 };
      const totals: number[] = [];
      const total = (balance: JsonBody) =>
        [...balance.available, ...balance.pending].reduce((sum: number, c: JsonBody) => sum + (c.currency === "USD" ? c.amount : 0), 0);
      const writes = Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < amounts.length) {
            const i = next++;
            expect(ok(await api.pay(i, amounts[i]!), "payment").status).toBe("succeeded");
            // Now and then a new hour of creation: more keys for the merges.
            if (i % 30 === 29) clock.advance(hour);
          }
        }),
      ).finally(() => {
        writing = false;
      });
      const merging = (async () => {
        while (writing) {
          const merged = await Promise.all([
            mergeBalanceTotals(a.app.dataSource, clock.now()),
            mergeBalanceTotals(b.app.dataSource, clock.now()),
          ]);
          merges.rounds++;
          merges.merged += merged[0] + merged[1];
        }
      })();
      // Only credits are written: one balance read after another never goes down, whichever instance reads it.
      const reading = (async () => {
        for (let i = 0; writing; i++) totals.push(total(await api.balance(i)));
      })();
      await Promise.all([writes, merging, reading]);

      const expected = amounts.reduce((sum, amount) => sum + amount - processingFee(amount, pricing.processing_fee_bps), 0);
      expect(merges.rounds).toBeGreaterThan(1);
      expect(merges.merged, "merges ran while payments were written").toBeGreaterThan(0);
      expect(totals.length).toBeGreaterThan(1);
      for (const [i, seen] of totals.entries()) {
        expect(seen, `read ${i} of ${totals.length}: ${totals.join(", ")}`).toBeLessThanOrEqual(expected);
        if (i > 0) expect(seen, `read ${i} of ${totals.length}: ${totals.join(", ")}`).toBeGreaterThanOrEqual(totals[i - 1]!);
      }

      const before = await expectBalanceMatchesTransactions(api, "before the last merge");
      expect(before).toHaveLength(amounts.length);
      expect(total(await api.balance(0))).toBe(expected);
      expect((await verifyLedger(a.app.dataSource)).differences).toEqual([]);
      const [onA, onB] = await Promise.all([api.balance(0), api.balance(1)]);
      await Promise.all([mergeBalanceTotals(a.app.dataSource, clock.now()), mergeBalanceTotals(b.app.dataSource, clock.now())]);
      await mergeBalanceTotals(a.app.dataSource, clock.now());
      expect(await api.balance(1)).toEqual(onA);
      expect(await api.balance(0)).toEqual(onB);
      expect((await verifyLedger(b.app.dataSource)).differences).toEqual([]);
      // Merged: one row per key of the merchant's running totals.
      const unmerged = await rows(
        a.app.dataSource,
        `SELECT currency, type, created_hour, available_hour, count(*)::int AS n FROM balance_totals
        WHERE merchant_id = $1 GROUP BY 1, 2, 3, 4 HAVING count(*) > 1`,
        [api.merchant.merchantId],
      );
      expect(unmerged).toEqual([]);
      await expectBalanceMatchesTransactions(api, "after the last merge");
    });
  },
);
