import { describe, expect, it } from "vitest";
import { mergeBalanceTotals } from "../src/ledger/totals.js";
import { verifyLedger } from "../src/ledger/verify.js";
import { cardData } from "./support/cards.js";
import { rest } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { newMerchant, updateProfile, type TestMerchant } from "./support/merchant.js";
import { payoutBodies, payoutCards } from "./support/payout-destinations.js";
import { expectError, type Json, restCaller, restList } from "./support/resource-api.js";
import { runningService } from "./support/running.js";
import { noPolling } from "./support/service.js";

/*
 * Balances and the ledger (decisions §11): every rule once, over REST, on both databases. The
 * service runs on a TestClock, so settlement happens when a test moves time; jobs due at once (an
 * instant refund, a payout's sending) run when the test asks. Concurrency on two instances is
 * test/ledger-concurrency.test.ts's; protocol parity is test/parity's.
 */

const clock = new TestClock(new Date("2026-12-01T10:20:00Z"));
const service = runningService(noPolling, clock);

const hour = 3_600_000;
const day = 24 * hour;

const { cardPayout } = payoutBodies(() => clock.now());

/** What the tests call, as one merchant's secret key sees it; results use the REST field names. */
interface Api {
  readonly merchant: TestMerchant;
  /** A card payment of `amount` captured at once (or authorized only, for `capture_method: manual`). */
  pay(amount: number, fields?: Json): Promise<Json>;
  capture(paymentId: string, amount?: number): Promise<Json>;
  refund(paymentId: string, amount?: number): Promise<Json>;
  dispute(paymentId: string): Promise<Json>;
  challenge(disputeId: string): Promise<Json>;
  resolve(disputeId: string, outcome: "won" | "lost"): Promise<Json>;
  payout(amount: number, cardNumber?: string, fields?: Json): Promise<Json>;
  cancelPayout(payoutId: string): Promise<Json>;
  balance(): Promise<Json>;
  transaction(id: string): Promise<Json>;
  transactions(params?: Json): Promise<Json>;
  /** The one balance transaction of `type` moving money for `sourceId`. */
  transactionOf(sourceId: string, type: string): Promise<Json>;
  report(params: Json): Promise<Json>;
}

async function merchantApi(pricing: Json = {}): Promise<Api> {
  const merchant = await newMerchant(service.url);
  if (Object.keys(pricing).length > 0) await updateProfile(service.url, merchant, pricing);
  const call = restCaller(service.url, merchant.apiKey);
  const list = restList(call, "GET", "/balance_transactions/list");
  return {
    merchant,
    pay: (amount, fields = {}) =>
      call("POST", "/payments", {
        amount,
        currency: "USD",
        profile_id: merchant.profileId,
        confirm: true,
        payment_method: "card",
        payment_method_data: cardData("4242424242424242", clock.now()),
        ...fields,
      }),
    capture: (paymentId, amount) =>
      call("POST", `/payments/${paymentId}/capture`, amount === undefined ? {} : { amount_to_capture: amount }),
    refund: async (paymentId, amount) => {
      const created = await call("POST", "/refunds", amount === undefined ? { payment_id: paymentId } : { payment_id: paymentId, amount });
      await service.jobs.runDue();
      return call("GET", `/refunds/${created.refund_id}`);
    },
    dispute: (paymentId) => call("POST", `/sandbox/payments/${paymentId}/dispute`),
    challenge: (disputeId) => call("POST", `/disputes/${disputeId}/evidence`, { evidence: { receipt: "Receipt #1001" } }),
    resolve: (disputeId, outcome) => call("POST", `/sandbox/disputes/${disputeId}/resolve`, { outcome }),
    payout: async (amount, cardNumber = payoutCards.succeeds, fields = {}) => {
      const created = await call("POST", "/payouts/create", { ...cardPayout(merchant, cardNumber, fields), amount });
      await service.jobs.runDue();
      return call("GET", `/payouts/${created.payout_id}`);
    },
    cancelPayout: (payoutId) => call("POST", `/payouts/${payoutId}/cancel`),
    balance: () => call("GET", "/balance"),
    transaction: (id) => call("GET", `/balance_transactions/${encodeURIComponent(id)}`),
    transactions: (params = {}) => list(params),
    transactionOf: async (sourceId, type) => {
      const { data } = await list({ source_id: sourceId, type });
      expect(data, `one ${type} of ${sourceId}`).toHaveLength(1);
      return (data as Json[])[0]!;
    },
    report: (params) => call("GET", `/reports/balance?${new URLSearchParams(params as Record<string, string>)}`),
  };
}

/** A balance as `{available, pending}` per currency, for short assertions. */
function amounts(balance: Json): Record<string, { available: number; pending: number }> {
  const out: Record<string, { available: number; pending: number }> = {};
  for (const { currency, amount } of balance.available as Json[]) out[currency as string] = { available: amount as number, pending: 0 };
  for (const { currency, amount } of balance.pending as Json[]) out[currency as string]!.pending = amount as number;
  return out;
}

/** Every balance of every merchant equals its recomputation, and every entry is balanced. */
async function expectLedgerVerified(): Promise<void> {
  const { differences } = await verifyLedger(service.app.dataSource);
  expect(differences).toEqual([]);
}

describe("balance transactions", () => {
  it("a captured payment is credited less the profile's processing fee, pending for the settlement delay on the service's clock", async () => {
    const api = await merchantApi({ processing_fee_bps: 290, settlement_delay_days: 3 });
    const payment = await api.pay(1050);
    expect(payment.status).toBe("succeeded");
    const txn = await api.transactionOf(payment.payment_id as string, "payment");
    const created = new Date(txn.created as string).getTime();
    expect(txn).toEqual({
      balance_transaction_id: expect.stringMatching(/^txn_/),
      merchant_id: api.merchant.merchantId,
      type: "payment",
      amount: 1050,
      // 1050 × 2.90 % = 30.45, rounded half-up to 30.
      fee: 30,
      net: 1020,
      currency: "USD",
      source_id: payment.payment_id,
      status: "pending",
      available_on: new Date(created + 3 * day).toISOString(),
      created: clock.now().toISOString(),
      description: `Payment ${payment.payment_id}`,
    });
    expect(await api.transaction(txn.balance_transaction_id as string)).toEqual(txn);
    expect(amounts(await api.balance())).toEqual({ USD: { available: 0, pending: 1020 } });

    clock.advance(3 * day - 1);
    expect(amounts(await api.balance())).toEqual({ USD: { available: 0, pending: 1020 } });
    clock.advance(1);
    expect(amounts(await api.balance())).toEqual({ USD: { available: 1020, pending: 0 } });
    expect((await api.transaction(txn.balance_transaction_id as string)).status).toBe("available");
  });

  it.each([
    [250, 1000, 25],
    // 0.5 of a unit rounds up, 0.49 down.
    [50, 1010, 5],
    [5000, 1, 1],
    [25, 200, 1],
    [49, 100, 0],
    [10000, 777, 777],
  ])("processing_fee_bps %i of %i is a fee of %i (half-up)", async (bps, amount, fee) => {
    const api = await merchantApi({ processing_fee_bps: bps });
    const payment = await api.pay(amount);
    expect(await api.transactionOf(payment.payment_id as string, "payment")).toMatchObject({ amount, fee, net: amount - fee });
  });

  it("a manual capture credits what was captured, when it is captured; an authorization alone moves nothing", async () => {
    const api = await merchantApi({ settlement_delay_days: 0 });
    const payment = await api.pay(5000, { capture_method: "manual" });
    expect(payment.status).toBe("requires_capture");
    expect((await api.transactions()).data).toEqual([]);
    expect(await api.balance()).toEqual({ available: [], pending: [] });
    clock.tick();
    await api.capture(payment.payment_id as string, 3000);
    expect(await api.transactionOf(payment.payment_id as string, "payment")).toMatchObject({ amount: 3000, fee: 0, status: "available" });
    expect(amounts(await api.balance())).toEqual({ USD: { available: 3000, pending: 0 } });
  });

  it("a declined payment moves nothing", async () => {
    const api = await merchantApi();
    const payment = await api.pay(1000, { payment_method_data: cardData("4000000000000002", clock.now()) });
    expect(payment.status).toBe("failed");
    expect((await api.transactions()).data).toEqual([]);
  });

  it("refunds debit what they return once they succeed; the payment's fee is not returned; partial refunds each debit their own", async () => {
    const api = await merchantApi({ processing_fee_bps: 300, settlement_delay_days: 0 });
    const payment = await api.pay(1000);
    const first = await api.refund(payment.payment_id as string, 400);
    const second = await api.refund(payment.payment_id as string, 600);
    expect([first.status, second.status]).toEqual(["succeeded", "succeeded"]);
    for (const refund of [first, second]) {
      expect(await api.transactionOf(refund.refund_id as string, "refund")).toMatchObject({
        amount: -(refund.amount as number),
        fee: 0,
        net: -(refund.amount as number),
        status: "available",
        description: `Refund ${refund.refund_id}`,
      });
    }
    // 1000 − 30 fee − 1000 refunded.
    expect(amounts(await api.balance())).toEqual({ USD: { available: -30, pending: 0 } });
    await expectLedgerVerified();
  });

  it("a dispute debits its amount and the dispute fee; won, both come back (the fee the dispute took, whatever the profile says now)", async () => {
    const api = await merchantApi({ dispute_fee: 1500, settlement_delay_days: 0 });
    const payment = await api.pay(20000);
    const dispute = await api.dispute(payment.payment_id as string);
    expect(await api.transactionOf(dispute.dispute_id as string, "dispute")).toMatchObject({
      amount: -20000,
      fee: 1500,
      net: -21500,
      status: "available",
    });
    expect(amounts(await api.balance())).toEqual({ USD: { available: -1500, pending: 0 } });
    await updateProfile(service.url, api.merchant, { dispute_fee: 2500 });
    await api.challenge(dispute.dispute_id as string);
    clock.tick();
    await api.resolve(dispute.dispute_id as string, "won");
    expect(await api.transactionOf(dispute.dispute_id as string, "dispute_reversal")).toMatchObject({
      amount: 20000,
      fee: -1500,
      net: 21500,
      description: `Dispute ${dispute.dispute_id} won`,
    });
    expect(amounts(await api.balance())).toEqual({ USD: { available: 20000, pending: 0 } });
    await expectLedgerVerified();
  });

  it("a lost dispute keeps its debit and fee, and moves nothing more", async () => {
    const api = await merchantApi({ dispute_fee: 1500, settlement_delay_days: 0 });
    const payment = await api.pay(20000);
    const dispute = await api.dispute(payment.payment_id as string);
    await api.challenge(dispute.dispute_id as string);
    await api.resolve(dispute.dispute_id as string, "lost");
    expect((await api.transactions({ source_id: dispute.dispute_id as string })).data).toHaveLength(1);
    expect(amounts(await api.balance())).toEqual({ USD: { available: -1500, pending: 0 } });
  });

  it("a payout debits at once, and a payout that fails or is cancelled is reversed; a balance may go negative", async () => {
    const api = await merchantApi();
    const sent = await api.payout(700);
    expect(sent.status).toBe("success");
    const failed = await api.payout(300, payoutCards.declined);
    expect(failed.status).toBe("failed");
    const held = await api.payout(200, payoutCards.succeeds, { confirm: false });
    expect(held.status).toBe("requires_fulfillment");
    // 700 sent, 300 failed and given back, 200 held.
    expect(amounts(await api.balance())).toEqual({ USD: { available: -900, pending: 0 } });
    clock.tick();
    await api.cancelPayout(held.payout_id as string);
    for (const payout of [failed, held]) {
      expect(await api.transactionOf(payout.payout_id as string, "payout_reversal")).toMatchObject({
        amount: payout.amount,
        fee: 0,
        net: payout.amount,
        description: `Payout ${payout.payout_id} reversed`,
      });
    }
    expect((await api.transactions({ source_id: sent.payout_id as string })).data).toMatchObject([{ type: "payout", amount: -700 }]);
    expect(amounts(await api.balance())).toEqual({ USD: { available: -700, pending: 0 } });
    await expectLedgerVerified();
  });

  it("keeps a balance per currency, and per environment", async () => {
    const api = await merchantApi({ settlement_delay_days: 0 });
    await api.pay(1000);
    await api.pay(2000, { currency: "EUR" });
    await api.pay(50, { currency: "JPY" });
    expect(await api.balance()).toEqual({
      available: [
        { currency: "EUR", amount: 2000 },
        { currency: "JPY", amount: 50 },
        { currency: "USD", amount: 1000 },
      ],
      pending: [
        { currency: "EUR", amount: 0 },
        { currency: "JPY", amount: 0 },
        { currency: "USD", amount: 0 },
      ],
    });
    const production = await rest(service.url, "GET", "/balance", {
      apiKey: (await newMerchant(service.url, { environment: "production" })).apiKey,
    });
    expect(production.body).toEqual({ available: [], pending: [] });
  });
});

describe("listing and retrieving", () => {
  it("filters by type, source_id, currency and status, newest first; another merchant's transaction is 404", async () => {
    const api = await merchantApi({ settlement_delay_days: 1 });
    const usd = await api.pay(1000);
    clock.tick();
    const eur = await api.pay(2000, { currency: "EUR" });
    clock.tick();
    const refund = await api.refund(usd.payment_id as string, 100);
    const sources = async (params: Json) => ((await api.transactions(params)).data as Json[]).map((t) => t.source_id);
    expect(await sources({})).toEqual([refund.refund_id, eur.payment_id, usd.payment_id]);
    expect(await sources({ type: "payment" })).toEqual([eur.payment_id, usd.payment_id]);
    expect(await sources({ currency: "eur" })).toEqual([eur.payment_id]);
    expect(await sources({ status: "available" })).toEqual([refund.refund_id]);
    expect(await sources({ status: "pending" })).toEqual([eur.payment_id, usd.payment_id]);
    expect(await sources({ source_id: usd.payment_id as string })).toEqual([usd.payment_id]);
    expect(await api.transactions({ limit: 1 })).toMatchObject({ total_count: 3, has_more: true });

    const other = await merchantApi();
    const txn = await api.transactionOf(usd.payment_id as string, "payment");
    await expectError(other.transaction(txn.balance_transaction_id as string), "HE_02", txn.balance_transaction_id as string);
    await expectError(api.transactions({ currency: "EURO" }), "IR_05", "currency");
    await expectError(api.transactions({ limit: 101 }), "IR_06", "limit");
  });

  it("is append-only and balanced underneath: the database refuses to change or delete a balance transaction, or to write one whose lines do not sum to zero", async () => {
    const api = await merchantApi();
    const payment = await api.pay(1000);
    const { merchantId } = api.merchant;
    await expect(
      service.app.dataSource.query("UPDATE balance_transactions SET amount = 0 WHERE merchant_id = $1", [merchantId]),
    ).rejects.toThrow(/append-only/);
    await expect(service.app.dataSource.query("DELETE FROM balance_transactions WHERE merchant_id = $1", [merchantId])).rejects.toThrow(
      /append-only/,
    );
    const copy = (lines: string) =>
      service.app.dataSource.query(
        `INSERT INTO balance_transactions (merchant_id, livemode, balance_transaction_id, profile_id, type, amount, fee, net, currency, source_id,
                                           available_on, created, line_accounts, line_amounts)
         SELECT merchant_id, livemode, 'txn_copy', profile_id, type, amount, fee, net, currency, source_id, available_on, created, ${lines}
           FROM balance_transactions WHERE merchant_id = $1 AND source_id = $2`,
        [merchantId, payment.payment_id],
      );
    await expect(copy("'{merchant_balance,customer_funds}', '{1000,-999}'")).rejects.toThrow(/balance_transactions_lines_balance/);
    await expect(copy("'{merchant_balance,merchant_balance}', '{1000,-1000}'")).rejects.toThrow(/balance_transactions_lines_balance/);
    await expect(copy("'{merchant_balance,petty_cash}', '{1000,-1000}'")).rejects.toThrow(/balance_transactions_lines_balance/);
  });

  it("npm run ledger:verify names a transaction whose lines sum to zero but disagree with its net", async () => {
    const api = await merchantApi();
    const payment = await api.pay(1000);
    const db = service.app.dataSource;
    // Written past the service, as a faulty writer would: the table's check holds (the lines sum to zero), the lines do not match the net.
    await db.query(
      `INSERT INTO balance_transactions (merchant_id, livemode, balance_transaction_id, profile_id, type, amount, fee, net, currency, source_id,
                                         available_on, created, line_accounts, line_amounts)
       SELECT merchant_id, livemode, 'txn_forged', profile_id, 'refund', -400, 0, -400, currency, 're_forged', created, created,
              '{merchant_balance,customer_funds}', '{-300,300}'
         FROM balance_transactions WHERE merchant_id = $1 AND source_id = $2`,
      [api.merchant.merchantId, payment.payment_id],
    );
    try {
      const { differences } = await verifyLedger(db);
      expect(differences).toContainEqual(
        expect.objectContaining({
          merchantId: api.merchant.merchantId,
          subject: "balance transaction txn_forged",
          detail: "2 lines summing to 0, merchant_balance -300 for net -400, fees 0 for fee 0",
        }),
      );
    } finally {
      await db.query("ALTER TABLE balance_transactions DISABLE TRIGGER balance_transactions_append_only");
      await db.query("DELETE FROM balance_transactions WHERE balance_transaction_id = 'txn_forged'");
      await db.query("ALTER TABLE balance_transactions ENABLE TRIGGER balance_transactions_append_only");
    }
  });

  it("writes each transaction as ledger lines summing to zero across the merchant's balance, fees and the customer's funds or the payout in transit", async () => {
    const api = await merchantApi({ processing_fee_bps: 100, dispute_fee: 500 });
    const payment = await api.pay(10000);
    const dispute = await api.dispute(payment.payment_id as string);
    const payout = await api.payout(100);
    const lines = async (sourceId: string, type: string) => {
      const txn = await api.transactionOf(sourceId, type);
      const rows: { account: string; amount: string }[] = await service.app.dataSource.query(
        "SELECT account, amount FROM ledger_lines WHERE merchant_id = $1 AND balance_transaction_id = $2 ORDER BY account",
        [api.merchant.merchantId, txn.balance_transaction_id],
      );
      return Object.fromEntries(rows.map((row) => [row.account, Number(row.amount)]));
    };
    expect(await lines(payment.payment_id as string, "payment")).toEqual({ customer_funds: -10000, fees: 100, merchant_balance: 9900 });
    expect(await lines(dispute.dispute_id as string, "dispute")).toEqual({ customer_funds: 10000, fees: 500, merchant_balance: -10500 });
    expect(await lines(payout.payout_id as string, "payout")).toEqual({ merchant_balance: -100, payout_clearing: 100 });
  });
});

describe("the balance report", () => {
  it("gives per currency the opening balance, the period's totals per type and the closing balance, as JSON and as CSV", async () => {
    const api = await merchantApi({ processing_fee_bps: 100, settlement_delay_days: 0 });
    clock.advance(hour);
    const before = await api.pay(5000);
    clock.advance(hour);
    const from = clock.now();
    clock.advance(90 * 60_000);
    const first = await api.pay(1000);
    await api.pay(3000);
    await api.refund(first.payment_id as string, 200);
    await api.pay(700, { currency: "EUR" });
    clock.advance(3 * hour);
    const to = clock.now();
    clock.advance(10 * 60_000);
    await api.pay(9000);
    expect(before.status).toBe("succeeded");

    const report = await api.report({ from: from.toISOString(), to: to.toISOString() });
    expect(report).toEqual({
      from: from.toISOString(),
      to: to.toISOString(),
      currencies: [
        {
          currency: "EUR",
          opening_balance: 0,
          activity: [{ type: "payment", count: 1, amount: 700, fee: 7, net: 693 }],
          closing_balance: 693,
        },
        {
          currency: "USD",
          opening_balance: 4950,
          activity: [
            { type: "payment", count: 2, amount: 4000, fee: 40, net: 3960 },
            { type: "refund", count: 1, amount: -200, fee: 0, net: -200 },
          ],
          closing_balance: 8710,
        },
      ],
    });
    expect(await api.report({ from: from.toISOString(), to: to.toISOString(), currency: "usd" })).toMatchObject({
      currencies: [{ currency: "USD", closing_balance: 8710 }],
    });

    const csv = await fetch(`${service.url}/reports/balance?from=${from.toISOString()}&to=${to.toISOString()}`, {
      headers: { "api-key": api.merchant.apiKey, accept: "text/csv" },
    });
    expect(csv.status).toBe(200);
    expect(csv.headers.get("content-type")).toBe("text/csv; charset=utf-8");
    expect(await csv.text()).toBe(
      [
        "currency,line,count,amount,fee,net",
        "EUR,opening_balance,,,,0",
        "EUR,payment,1,700,7,693",
        "EUR,closing_balance,,,,693",
        "USD,opening_balance,,,,4950",
        "USD,payment,2,4000,40,3960",
        "USD,refund,1,-200,0,-200",
        "USD,closing_balance,,,,8710",
        "",
      ].join("\r\n"),
    );
  });

  it("adds up the same wherever the period begins, on a whole hour or not, before and after the running totals are merged and folded into days", async () => {
    const api = await merchantApi({ processing_fee_bps: 75 });
    const start = clock.now();
    for (let i = 0; i < 12; i++) {
      await api.pay(1000 + i * 37);
      clock.advance(23 * 60_000);
    }
    const end = clock.now();
    const transactions = (await api.transactions({ limit: 100 })).data as Json[];
    const netBefore = (time: Date) =>
      transactions.filter((t) => new Date(t.created as string) < time).reduce((sum, t) => sum + (t.net as number), 0);
    const cuts = [0, 7, 60, 61, 119, 180, 203, 275].map((minutes) => new Date(start.getTime() + minutes * 60_000));
    const expectReportsRight = async () => {
      for (const cut of cuts) {
        const [usd] = (await api.report({ from: cut.toISOString(), to: end.toISOString() })).currencies as Json[];
        const activity = (usd!.activity as Json[]).reduce((sum, line) => sum + (line.net as number), 0);
        expect({ opening: usd!.opening_balance, activity, closing: usd!.closing_balance }, `from ${cut.toISOString()}`).toEqual({
          opening: netBefore(cut),
          activity: netBefore(end) - netBefore(cut),
          closing: netBefore(end),
        });
      }
    };
    await expectReportsRight();
    expect(await mergeBalanceTotals(service.app.dataSource, clock.now())).toBeGreaterThan(0);
    await expectReportsRight();
    const balance = await api.balance();

    // Days later the settled hours are folded into their days: the same reports, the same balance.
    clock.advance(5 * day);
    const hourRows = async () => {
      const [{ n }] = await service.app.dataSource.query(
        "SELECT count(*)::int AS n FROM balance_totals WHERE merchant_id = $1 AND span_hours = 1",
        [api.merchant.merchantId],
      );
      return n as number;
    };
    expect(await hourRows()).toBeGreaterThan(0);
    expect(await mergeBalanceTotals(service.app.dataSource, clock.now())).toBeGreaterThan(0);
    expect(await hourRows()).toBe(0);
    await expectReportsRight();
    expect(amounts(await api.balance())).toEqual({
      USD: { available: amounts(balance).USD!.available + amounts(balance).USD!.pending, pending: 0 },
    });
    await expectLedgerVerified();
  });

  it("refuses a period without from or to, or that ends before it begins, naming the field", async () => {
    const api = await merchantApi();
    await expectError(api.report({ to: "2026-12-01T00:00:00Z" }), "IR_04", "from");
    await expectError(api.report({ from: "2026-12-01T00:00:00Z" }), "IR_04", "to");
    await expectError(api.report({ from: "2026-12-01T00:00:00Z", to: "2026-12-01T00:00:00Z" }), "IR_05", "to");
    await expectError(api.report({ from: "2026-12-01T00:00:00Z", to: "2026-12-02T00:00:00Z", currency: "XX" }), "IR_05", "currency");
    await expectError(api.report({ from: "yesterday", to: "2026-12-02T00:00:00Z" }), "IR_05", "from");
  });
});

describe("profile pricing", () => {
  it("defaults to no fees and two days' delay; refuses values out of range, naming the field", async () => {
    const merchant = await newMerchant(service.url);
    const profile = await rest(service.url, "GET", `/merchants/${merchant.merchantId}/profiles/${merchant.profileId}`, { admin: true });
    expect(profile.body).toMatchObject({ processing_fee_bps: 0, dispute_fee: 0, settlement_delay_days: 2 });
    for (const [field, value] of [
      ["processing_fee_bps", 10001],
      ["processing_fee_bps", -1],
      ["dispute_fee", -5],
      ["settlement_delay_days", 366],
    ] as const) {
      const res = await rest(service.url, "POST", `/merchants/${merchant.merchantId}/profiles/${merchant.profileId}`, {
        admin: true,
        body: { [field]: value },
      });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: "IR_05", message: expect.stringContaining(field) });
    }
    const created = await rest(service.url, "POST", `/merchants/${merchant.merchantId}/profiles`, {
      admin: true,
      body: { processing_fee_bps: 290, dispute_fee: 1500, settlement_delay_days: 7 },
    });
    expect(created.body).toMatchObject({ processing_fee_bps: 290, dispute_fee: 1500, settlement_delay_days: 7 });
  });
});
