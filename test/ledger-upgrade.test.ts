import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { applyMigrations } from "../src/db/data-source.js";
import { startEmbeddedDatabase } from "../src/db/embedded.js";
import { newId } from "../src/ids.js";
import { verifyLedger } from "../src/ledger/verify.js";
import { migrations } from "../src/migrations/index.js";
import { sealDestination } from "../src/payouts/destination.js";
import { DataCipher } from "../src/secrets/data-cipher.js";
import { rest } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { emptyDatabaseUrl, onDatabase, onPostgres } from "./support/database.js";
import { adminIssue, updateProfile, type TestMerchant } from "./support/merchant.js";
import { type Json, query, restCaller } from "./support/resource-api.js";
import { noPolling, startService, testDataEncryptionKey, type TestService } from "./support/service.js";

/*
 * The upgrade to the ledger (issue 42): a database made by the previous release — every migration
 * but the ledger's, filled through SQL as that release left its payments, refunds, disputes and
 * payouts — is started on by this release as a deploy would, so the ledger migration runs at the
 * first start and backfills a balance transaction for each movement of money. The balance must then
 * be right at once, on the service's clock, and a capture after the upgrade must add to it. Runs on
 * the database the run uses: a PostgreSQL database of its own, or an embedded DATA_DIR of its own.
 *
 * What each object should have moved is written out here from the rules of decisions §11 as the
 * issue states them, not read from the migration or from verifyLedger (whose checks state the same
 * rules in SQL of their own), so a rule written wrong in both fails here.
 */

const hour = 3_600_000;
const day = 24 * hour;
const minute = 60_000;

/** The service's clock at the first start after the upgrade: 10:20, so an availability at 10:40 lies within the current hour. */
const clock = new TestClock(new Date("2026-12-01T10:20:00Z"));
const startedAt = clock.now().getTime();
/** `offset` from the first start. */
const at = (offset: number) => new Date(startedAt + offset);

/** The previous release: every migration before the ledger's. */
const ledgerMigration = "Ledger1766200000000";
const previousMigrations = migrations.slice(
  0,
  migrations.findIndex((Migration) => new Migration().name === ledgerMigration),
);

const merchantId = newId("mer");
const profileId = newId("pro");
/** Another merchant, whose money must stay out of the first's balance. */
const otherMerchantId = newId("mer");
const otherProfileId = newId("pro");

type Currency = "USD" | "EUR";

interface OldPayment {
  readonly id: string;
  readonly merchantId: string;
  readonly profileId: string;
  readonly livemode: boolean;
  readonly status: "succeeded" | "requires_capture" | "failed" | "cancelled";
  readonly amount: number;
  readonly received: number | null;
  readonly capturable: number;
  readonly currency: Currency;
  readonly captureMethod: "automatic" | "manual";
  readonly created: Date;
}

function payment(fields: Partial<OldPayment> & Pick<OldPayment, "amount" | "currency" | "created">): OldPayment {
  const succeeded = fields.status === undefined || fields.status === "succeeded";
  return {
    id: newId("pay"),
    merchantId,
    profileId,
    livemode: false,
    status: "succeeded",
    received: succeeded ? fields.amount : null,
    capturable: 0,
    captureMethod: "automatic",
    ...fields,
  };
}

const payments = {
  /** Long settled. */
  usdSettled: payment({ amount: 10_000, currency: "USD", created: at(-5 * day) }),
  /** A manual capture of part of the authorization: the credit is what was received. */
  usdPartial: payment({ amount: 5_000, received: 3_000, currency: "USD", captureMethod: "manual", created: at(-3 * day) }),
  /** Created a day ago: pending for another day (a later hour than the current one). */
  usdRecent: payment({ amount: 2_500, currency: "USD", created: at(-day) }),
  /** Available at 10:40, within the current hour: pending for another 20 minutes. */
  usdThisHour: payment({ amount: 700, currency: "USD", created: at(-2 * day + 20 * minute) }),
  /** Created exactly two days ago: available now. */
  usdBoundary: payment({ amount: 400, currency: "USD", created: at(-2 * day) }),
  /** Authorized only; captured after the upgrade. */
  usdAuthorized: payment({
    amount: 9_000,
    status: "requires_capture",
    capturable: 9_000,
    currency: "USD",
    captureMethod: "manual",
    created: at(-hour),
  }),
  usdFailed: payment({ amount: 1_200, status: "failed", currency: "USD", created: at(-4 * day) }),
  usdCancelled: payment({ amount: 1_300, status: "cancelled", currency: "USD", captureMethod: "manual", created: at(-6 * day) }),
  eurSettled: payment({ amount: 20_000, currency: "EUR", created: at(-10 * day) }),
  /** Pending for another 36 hours. */
  eurRecent: payment({ amount: 8_000, currency: "EUR", created: at(-12 * hour) }),
  eurDisputedWon: payment({ amount: 6_000, currency: "EUR", created: at(-7 * day) }),
  eurDisputedLost: payment({ amount: 4_000, currency: "EUR", created: at(-8 * day) }),
  eurFailed: payment({ amount: 900, status: "failed", currency: "EUR", created: at(-2 * day) }),
  /** Production money: never in the sandbox balance. */
  usdLive: payment({ amount: 99_900, livemode: true, currency: "USD", created: at(-5 * day) }),
  /** Another merchant's. */
  usdOtherMerchant: payment({
    merchantId: otherMerchantId,
    profileId: otherProfileId,
    amount: 12_345,
    currency: "USD",
    created: at(-5 * day),
  }),
};

interface OldRefund {
  readonly id: string;
  readonly payment: OldPayment;
  readonly status: "succeeded" | "pending" | "failed" | "manual_review";
  readonly amount: number;
  readonly created: Date;
  readonly updated: Date;
}

const refund = (fields: Omit<OldRefund, "id">): OldRefund => ({ id: newId("ref"), ...fields });

const refunds = [
  refund({ payment: payments.usdSettled, status: "succeeded", amount: 1_500, created: at(-4 * day), updated: at(-4 * day + minute) }),
  refund({ payment: payments.usdSettled, status: "pending", amount: 500, created: at(-hour), updated: at(-hour) }),
  refund({ payment: payments.usdPartial, status: "manual_review", amount: 200, created: at(-day), updated: at(-day + minute) }),
  refund({ payment: payments.eurSettled, status: "succeeded", amount: 2_000, created: at(-9 * day), updated: at(-9 * day + 30_000) }),
  refund({ payment: payments.eurRecent, status: "failed", amount: 1_000, created: at(-6 * hour), updated: at(-6 * hour + minute) }),
];

interface OldDispute {
  readonly id: string;
  readonly payment: OldPayment;
  readonly status: "opened" | "challenged" | "won" | "lost";
  readonly amount: number;
  readonly created: Date;
  readonly updated: Date;
}

const dispute = (fields: Omit<OldDispute, "id">): OldDispute => ({ id: newId("dis"), ...fields });

const disputes = [
  dispute({ payment: payments.usdPartial, status: "opened", amount: 3_000, created: at(-2 * day), updated: at(-2 * day) }),
  dispute({ payment: payments.usdRecent, status: "challenged", amount: 2_500, created: at(-20 * hour), updated: at(-10 * hour) }),
  dispute({ payment: payments.eurDisputedWon, status: "won", amount: 6_000, created: at(-6 * day), updated: at(-2 * day - hour) }),
  dispute({ payment: payments.eurDisputedLost, status: "lost", amount: 4_000, created: at(-7 * day), updated: at(-3 * day) }),
];

interface OldPayout {
  readonly id: string;
  readonly status: "success" | "failed" | "cancelled" | "pending";
  readonly amount: number;
  readonly currency: Currency;
  readonly created: Date;
  readonly updated: Date;
}

const payout = (fields: Omit<OldPayout, "id">): OldPayout => ({ id: newId("po"), ...fields });

const payouts = [
  payout({ status: "success", amount: 5_000, currency: "USD", created: at(-2 * day), updated: at(-2 * day + minute) }),
  payout({ status: "failed", amount: 1_000, currency: "USD", created: at(-3 * day), updated: at(-3 * day + minute) }),
  payout({ status: "cancelled", amount: 3_000, currency: "EUR", created: at(-day), updated: at(-day + hour) }),
  payout({ status: "pending", amount: 2_500, currency: "EUR", created: at(-30 * minute), updated: at(-30 * minute) }),
];

/** Every object the previous release left for the merchant's sandbox, by id: what the tests list transactions of. */
const sandboxSources = [
  ...Object.values(payments)
    .filter((p) => p.merchantId === merchantId && !p.livemode)
    .map((p) => p.id),
  ...refunds.map((r) => r.id),
  ...disputes.map((d) => d.id),
  ...payouts.map((p) => p.id),
];

/** A movement of money as the API should show it. */
interface Movement {
  readonly merchantId: string;
  readonly livemode: boolean;
  readonly type: string;
  readonly sourceId: string;
  readonly amount: number;
  readonly fee: number;
  readonly currency: string;
  readonly created: Date;
  readonly availableOn: Date;
  readonly description: string;
}

const sandbox = { merchantId, livemode: false };

/**
 * The movements the issue's rules imply: a succeeded payment credits what it received, available two
 * days after its creation; a succeeded refund debits its amount when it succeeded; every dispute
 * debits its amount when opened, and a won one credits it back when won; every payout debits its
 * amount when created, and a failed or cancelled one credits it back when it ended. No fees: there
 * were none before the ledger. Everything but a payment is available at once.
 */
function backfilled(): Movement[] {
  const movement = (
    owner: { merchantId: string; livemode: boolean },
    type: string,
    sourceId: string,
    amount: number,
    currency: string,
    created: Date,
    description: string,
  ): Movement => ({
    ...owner,
    type,
    sourceId,
    amount,
    fee: 0,
    currency,
    created,
    availableOn: type === "payment" ? new Date(created.getTime() + 2 * day) : created,
    description,
  });
  const out: Movement[] = [];
  for (const p of Object.values(payments)) {
    if (p.status === "succeeded" && p.received !== null && p.received > 0) {
      out.push(movement(p, "payment", p.id, p.received, p.currency, p.created, `Payment ${p.id}`));
    }
  }
  for (const r of refunds) {
    if (r.status === "succeeded") out.push(movement(sandbox, "refund", r.id, -r.amount, r.payment.currency, r.updated, `Refund ${r.id}`));
  }
  for (const d of disputes) {
    out.push(movement(sandbox, "dispute", d.id, -d.amount, d.payment.currency, d.created, `Dispute ${d.id}`));
    if (d.status === "won")
      out.push(movement(sandbox, "dispute_reversal", d.id, d.amount, d.payment.currency, d.updated, `Dispute ${d.id} won`));
  }
  for (const p of payouts) {
    out.push(movement(sandbox, "payout", p.id, -p.amount, p.currency, p.created, `Payout ${p.id}`));
    if (p.status === "failed" || p.status === "cancelled") {
      out.push(movement(sandbox, "payout_reversal", p.id, p.amount, p.currency, p.updated, `Payout ${p.id} reversed`));
    }
  }
  return out;
}

/** What the ledger should hold: the backfill, and what the tests add after the upgrade. */
const expected: Movement[] = backfilled();

/** The balance `owner` should see at `now`, as GET /balance answers it: one entry per currency with any transaction, in currency order. */
function expectedBalance(owner: { merchantId: string; livemode: boolean }, now: Date): Json {
  const sums = new Map<string, { available: number; pending: number }>();
  for (const m of expected) {
    if (m.merchantId !== owner.merchantId || m.livemode !== owner.livemode) continue;
    const sum = sums.get(m.currency) ?? { available: 0, pending: 0 };
    if (m.availableOn.getTime() <= now.getTime()) sum.available += m.amount - m.fee;
    else sum.pending += m.amount - m.fee;
    sums.set(m.currency, sum);
  }
  const currencies = [...sums.keys()].sort();
  return {
    available: currencies.map((currency) => ({ currency, amount: sums.get(currency)!.available })),
    pending: currencies.map((currency) => ({ currency, amount: sums.get(currency)!.pending })),
  };
}

/** The balance transactions of `sourceId` as the list answers them at `now`: newest first. */
function expectedTransactions(sourceId: string, now: Date): Json[] {
  return expected
    .filter((m) => m.sourceId === sourceId)
    .sort((a, b) => b.created.getTime() - a.created.getTime())
    .map((m) => ({
      balance_transaction_id: expect.stringMatching(/^txn_/),
      merchant_id: m.merchantId,
      type: m.type,
      amount: m.amount,
      fee: m.fee,
      net: m.amount - m.fee,
      currency: m.currency,
      source_id: m.sourceId,
      status: m.availableOn.getTime() <= now.getTime() ? "available" : "pending",
      available_on: m.availableOn.toISOString(),
      created: m.created.toISOString(),
      description: m.description,
    }));
}

/** One row of `table`, its objects as JSON. */
async function insert(db: pg.Client, table: string, row: Record<string, unknown>): Promise<void> {
  const columns = Object.keys(row);
  const values = Object.values(row).map((value) =>
    value !== null && typeof value === "object" && !(value instanceof Date) ? JSON.stringify(value) : value,
  );
  await db.query(`INSERT INTO ${table} (${columns.join(", ")}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(", ")})`, values);
}

const card = { last4: "4242", brand: "visa", exp_month: "12", exp_year: "2030" };
const cipher = new DataCipher(Buffer.from(testDataEncryptionKey, "hex"));

/** Writes what the previous release left: its merchants and profiles, then payments, refunds, disputes and payouts as its code wrote them. */
async function fillAsThePreviousRelease(db: pg.Client): Promise<void> {
  await db.query("BEGIN");
  for (const [merchant, profile, created] of [
    [merchantId, profileId, at(-30 * day)],
    [otherMerchantId, otherProfileId, at(-20 * day)],
  ] as const) {
    await insert(db, "merchants", { merchant_id: merchant, merchant_name: "Upgraded merchant", default_profile_id: profile, created });
    await insert(db, "profiles", {
      profile_id: profile,
      merchant_id: merchant,
      profile_name: "Default",
      webhook_secret: `whsec_${"k".repeat(32)}`,
      created,
    });
  }
  for (const p of Object.values(payments)) {
    const authorized = p.status !== "failed";
    await insert(db, "payments", {
      merchant_id: p.merchantId,
      livemode: p.livemode,
      payment_id: p.id,
      profile_id: p.profileId,
      status: p.status,
      amount: p.amount,
      currency: p.currency,
      amount_capturable: p.capturable,
      amount_received: p.received,
      capture_method: p.captureMethod,
      payment_method: "card",
      card,
      description: "Order before the ledger",
      client_secret: `${p.id}_secret_${"s".repeat(24)}`,
      error_code: authorized ? null : "card_declined",
      error_message: authorized ? null : "The card was declined.",
      cancellation_reason: p.status === "cancelled" ? "requested_by_customer" : null,
      metadata: { order: p.id },
      processor: "sandbox",
      processor_reference: `sbx_${p.id.slice(4)}`,
      created: p.created,
      modified_at: p.created,
    });
  }
  for (const r of refunds) {
    const p = r.payment;
    await insert(db, "refunds", {
      merchant_id: p.merchantId,
      livemode: p.livemode,
      refund_id: r.id,
      payment_id: p.id,
      profile_id: p.profileId,
      status: r.status,
      amount: r.amount,
      currency: p.currency,
      reason: "requested_by_customer",
      refund_type: "instant",
      error_code: r.status === "failed" ? "processor_declined" : null,
      error_message: r.status === "failed" ? "The processor declined the refund." : null,
      processor_reference: r.status === "pending" ? null : `sbx_${r.id.slice(4)}`,
      created: r.created,
      updated: r.updated,
    });
  }
  for (const d of disputes) {
    const p = d.payment;
    await insert(db, "disputes", {
      merchant_id: p.merchantId,
      livemode: p.livemode,
      dispute_id: d.id,
      payment_id: p.id,
      profile_id: p.profileId,
      status: d.status,
      amount: d.amount,
      currency: p.currency,
      reason: "fraudulent",
      evidence_due_by: new Date(d.created.getTime() + 7 * day),
      evidence: d.status === "opened" ? null : { receipt: "Receipt #1001" },
      created: d.created,
      updated: d.updated,
    });
  }
  for (const p of payouts) {
    const ended = p.status !== "pending";
    const attempt = { attempt_id: newId("att"), processor: "sandbox_swift", created: p.created.toISOString() };
    await insert(db, "payouts", {
      merchant_id: merchantId,
      livemode: false,
      payout_id: p.id,
      profile_id: profileId,
      status: p.status,
      amount: p.amount,
      currency: p.currency,
      payout_type: "bank",
      priority: "regular",
      destination: { bank: { last4: "6789", bank_name: "Sandbox Bank" } },
      // A payout still to be sent keeps its destination sealed, as the previous release did.
      destination_ciphertext: ended
        ? null
        : sealDestination(
            cipher,
            { merchantId, livemode: false, payoutId: p.id },
            {
              type: "bank",
              bankName: "Sandbox Bank",
              accountNumber: "000123456789",
              routingNumber: "110000000",
              holderName: "A. Merchant",
            },
          ),
      processor: p.status === "cancelled" || p.status === "pending" ? null : "sandbox_swift",
      confirm: p.status !== "pending",
      error_code: p.status === "failed" ? "account_closed" : null,
      error_message: p.status === "failed" ? "The bank account is closed." : null,
      attempts:
        p.status === "success"
          ? [{ ...attempt, status: "success", processor_reference: `sbx_${p.id.slice(3)}` }]
          : p.status === "failed"
            ? [
                {
                  ...attempt,
                  status: "failed",
                  error_code: "account_closed",
                  error_message: "The bank account is closed.",
                  retryable: false,
                },
              ]
            : [],
      created: p.created,
      updated: p.updated,
    });
  }
  await db.query("COMMIT");
}

/** What the previous release's database looked like just before the upgrade. */
interface BeforeUpgrade {
  readonly applied: string[];
  readonly ledgerTable: string | null;
}

/**
 * Makes the previous release's database, filled, and returns where it is as the service's
 * environment: a new PostgreSQL database, or a DATA_DIR of its own for the embedded database.
 */
async function previousReleaseDatabase(): Promise<{ env: NodeJS.ProcessEnv; before: BeforeUpgrade; cleanUp: () => Promise<void> }> {
  const prepare = async (url: string): Promise<BeforeUpgrade> => {
    const applied = await applyMigrations(url, 10_000, previousMigrations);
    return onDatabase(url, async (db) => {
      await fillAsThePreviousRelease(db);
      const { rows } = await db.query<{ ledger: string | null }>("SELECT to_regclass('balance_transactions')::text AS ledger");
      return { applied, ledgerTable: rows[0]!.ledger };
    });
  };
  if (onPostgres) {
    const url = await emptyDatabaseUrl();
    // The run drops the database with the per-file ones.
    return { env: { DATABASE_URL: url }, before: await prepare(url), cleanUp: async () => {} };
  }
  const dataDir = await mkdtemp(path.join(tmpdir(), "ledger-upgrade-"));
  const cleanUp = () => rm(dataDir, { recursive: true, force: true });
  try {
    const embedded = await startEmbeddedDatabase(dataDir, 2);
    try {
      return { env: { DATA_DIR: dataDir }, before: await prepare(embedded.url), cleanUp };
    } finally {
      await embedded.close();
    }
  } catch (error) {
    await cleanUp();
    throw error;
  }
}

describe("the first start after the upgrade to the ledger, on a database of the previous release", () => {
  let before: BeforeUpgrade;
  let cleanUp: () => Promise<void> = async () => {};
  let service: TestService | undefined;
  let merchant: TestMerchant;
  let api: ReturnType<typeof restCaller>;

  beforeAll(async () => {
    const database = await previousReleaseDatabase();
    before = database.before;
    cleanUp = database.cleanUp;
    // Started as a deploy starts it: MIGRATE_ON_START (the default) applies what the database lacks.
    service = await startService({ ...noPolling, ...database.env }, clock);
    const issued = await adminIssue(service.url, merchantId, { environment: "sandbox", kind: "secret" });
    merchant = { merchantId, profileId, apiKey: issued.api_key, keyId: issued.key_id };
    api = restCaller(service.url, merchant.apiKey);
  }, 180_000);

  afterAll(async () => {
    await service?.close();
    await cleanUp();
  });

  const url = () => service!.url;
  const balanceTransactions = async (params: Json) => api("GET", `/balance_transactions/list${query(params)}`);

  it("the database had every migration but the ledger's, and the first start applies the ledger's", async () => {
    expect(previousMigrations.length).toBeGreaterThan(0);
    expect(before.applied).toEqual(previousMigrations.map((Migration) => new Migration().name));
    expect(before.ledgerTable).toBeNull();
    const applied = (await service!.app.dataSource.query("SELECT name FROM migrations ORDER BY id")) as { name: string }[];
    expect(applied.map((row) => row.name)).toEqual(migrations.map((Migration) => new Migration().name));
    expect(applied[previousMigrations.length]?.name).toBe(ledgerMigration);
  });

  it("GET /balance shows at once what the previous release's objects moved, per currency, payments pending for two days after their creation", async () => {
    const balance = await api("GET", "/balance");
    expect(balance).toEqual(expectedBalance(sandbox, clock.now()));
    // The sums, written out once, so an expectation computed wrong cannot pass unnoticed.
    expect(balance).toEqual({
      available: [
        // 20000 + 6000 + 4000 − 2000 refunded − 6000 + 6000 won − 4000 lost − 3000 + 3000 cancelled − 2500 pending payout.
        { currency: "EUR", amount: 21_500 },
        // 10000 + 3000 + 400 − 1500 refunded − 3000 − 2500 disputed − 5000 − 1000 + 1000 failed payout.
        { currency: "USD", amount: 1_400 },
      ],
      pending: [
        { currency: "EUR", amount: 8_000 },
        // 2500 until tomorrow, 700 until 10:40.
        { currency: "USD", amount: 3_200 },
      ],
    });
  });

  it("the production balance holds only production money, and another merchant's stays its own", async () => {
    const production = await adminIssue(url(), merchantId, { environment: "production", kind: "secret" });
    const live = await rest(url(), "GET", "/balance", { apiKey: production.api_key });
    expect(live.status, JSON.stringify(live.body)).toBe(200);
    expect(live.body).toEqual({ available: [{ currency: "USD", amount: 99_900 }], pending: [{ currency: "USD", amount: 0 }] });
    const other = await adminIssue(url(), otherMerchantId, { environment: "sandbox", kind: "secret" });
    const theirs = await rest(url(), "GET", "/balance", { apiKey: other.api_key });
    expect(theirs.body).toEqual({ available: [{ currency: "USD", amount: 12_345 }], pending: [{ currency: "USD", amount: 0 }] });
  });

  it("each object of the previous release has exactly the balance transactions its status implies, and there are no others", async () => {
    for (const sourceId of sandboxSources) {
      const listed = await balanceTransactions({ source_id: sourceId });
      expect(listed.data, sourceId).toEqual(expectedTransactions(sourceId, clock.now()));
      expect(listed.total_count, sourceId).toBe(expectedTransactions(sourceId, clock.now()).length);
    }
    const all = await balanceTransactions({ limit: 100 });
    const mine = expected.filter((m) => m.merchantId === merchantId && !m.livemode);
    expect(all.total_count).toBe(mine.length);
    expect((all.data as Json[]).map((t) => `${t.type} of ${t.source_id}`).sort()).toEqual(
      mine.map((m) => `${m.type} of ${m.sourceId}`).sort(),
    );
    // Objects that moved no money: a payment not captured, failed or cancelled; a refund not succeeded.
    const movedNothing = [
      payments.usdAuthorized,
      payments.usdFailed,
      payments.usdCancelled,
      payments.eurFailed,
      ...refunds.filter((r) => r.status !== "succeeded"),
    ];
    expect(movedNothing).toHaveLength(7);
    for (const none of movedNothing) {
      expect((await balanceTransactions({ source_id: none.id })).data, none.id).toEqual([]);
    }
  });

  it("npm run ledger:verify's check finds every balance consistent with the objects, the ledger lines and the running totals", async () => {
    const verification = await verifyLedger(service!.app.dataSource);
    expect(verification.differences).toEqual([]);
    expect(verification.transactions).toBe(expected.length);
    // Sandbox USD and EUR, production USD, the other merchant's USD.
    expect(verification.balances).toBe(4);
  });

  it("a backfilled payment's credit becomes available at its available_on on the service's clock, to the millisecond", async () => {
    const later = [...new Set(expected.filter((m) => m.availableOn > clock.now()).map((m) => m.availableOn.getTime()))].sort(
      (a, b) => a - b,
    );
    // 10:40 today (within the current hour), tomorrow 10:20 (USD), the day after 22:20 (EUR).
    expect(later).toEqual([
      payments.usdThisHour.created.getTime() + 2 * day,
      payments.usdRecent.created.getTime() + 2 * day,
      payments.eurRecent.created.getTime() + 2 * day,
    ]);
    for (const availableOn of later) {
      clock.advance(availableOn - 1 - clock.now().getTime());
      expect(await api("GET", "/balance"), `just before ${new Date(availableOn).toISOString()}`).toEqual(
        expectedBalance(sandbox, clock.now()),
      );
      clock.advance(1);
      expect(await api("GET", "/balance"), `at ${new Date(availableOn).toISOString()}`).toEqual(expectedBalance(sandbox, clock.now()));
    }
    expect(await api("GET", "/balance")).toEqual({
      available: [
        { currency: "EUR", amount: 29_500 },
        { currency: "USD", amount: 4_600 },
      ],
      pending: [
        { currency: "EUR", amount: 0 },
        { currency: "USD", amount: 0 },
      ],
    });
    for (const p of [payments.usdThisHour, payments.eurRecent, payments.usdRecent]) {
      expect((await balanceTransactions({ source_id: p.id })).data).toMatchObject([{ type: "payment", status: "available" }]);
    }
  });

  it("a capture after the upgrade of a payment the previous release authorized adds to the backfilled balance, priced by the profile as it is now", async () => {
    await updateProfile(url(), merchant, { processing_fee_bps: 250, settlement_delay_days: 1 });
    const earlier = await api("GET", "/balance");
    clock.tick();
    const captured = await api("POST", `/payments/${payments.usdAuthorized.id}/capture`, { amount_to_capture: 6_000 });
    expect(captured).toMatchObject({ payment_id: payments.usdAuthorized.id, status: "succeeded", amount_received: 6_000 });
    const now = clock.now();
    // 6000 × 2.5 % = 150.
    expected.push({
      merchantId,
      livemode: false,
      type: "payment",
      sourceId: payments.usdAuthorized.id,
      amount: 6_000,
      fee: 150,
      currency: "USD",
      created: now,
      availableOn: new Date(now.getTime() + day),
      description: `Payment ${payments.usdAuthorized.id}`,
    });
    expect((await balanceTransactions({ source_id: payments.usdAuthorized.id })).data).toEqual(
      expectedTransactions(payments.usdAuthorized.id, now),
    );
    const after = await api("GET", "/balance");
    expect(after).toEqual(expectedBalance(sandbox, now));
    expect(after).toEqual({
      available: earlier.available,
      pending: [
        { currency: "EUR", amount: 0 },
        { currency: "USD", amount: 5_850 },
      ],
    });
    // The backfilled entries keep what they were written with: no fee, two days.
    expect((await balanceTransactions({ source_id: payments.usdSettled.id })).data).toEqual(
      expectedTransactions(payments.usdSettled.id, now),
    );
    expect((await verifyLedger(service!.app.dataSource)).differences).toEqual([]);

    clock.advance(day);
    expect(await api("GET", "/balance")).toEqual({
      available: [
        { currency: "EUR", amount: 29_500 },
        { currency: "USD", amount: 4_600 + 5_850 },
      ],
      pending: [
        { currency: "EUR", amount: 0 },
        { currency: "USD", amount: 0 },
      ],
    });
  });
});
