/*
 * `npm run bench:seed`: fills a migrated, empty database with a grown merchant base, so that plans and
 * latencies can be looked at as they will be after months in production (docs/performance.md, "Grown
 * database"). SEED_PAYMENTS (default 5,000,000) payments over months, with one merchant per 5,000
 * payments, one customer per 50 and one refund per 10, all sandbox. Rows are built by the service's
 * own entities, views and event code, so they are the rows the service would have written; they are
 * loaded with COPY in transactions of one time window each, oldest first, so events are numbered
 * (`txid`, `seq`) in the order they happened. Then payments and events are counted (the load skips
 * the triggers that count them), the ledger is written for the captured payments and succeeded
 * refunds (`loadLedger`), every table is vacuumed and analyzed, and a checkpoint writes it all out
 * (the seeding user must be allowed CHECKPOINT: a superuser or `pg_checkpoint`).
 *
 * Every merchant gets a sandbox secret key hashed with API_KEY_HASH_SECRET (the benchmarks' default
 * when unset); SEED_KEYS_FILE (default bench/seed-keys.json) receives each merchant's key, profile and
 * number of payments, largest first, for benchmarks to call as.
 */
import "reflect-metadata";
import { writeFileSync } from "node:fs";
import { pipeline } from "node:stream/promises";
import { Readable } from "node:stream";
import type pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { DataSource, type EntityMetadata, type EntityTarget } from "typeorm";
import type { PostgresDriver } from "typeorm/driver/postgres/PostgresDriver.js";
import { ApiKeyRow } from "../src/api-keys/api-key.entity.js";
import { ApiKeyHasher, generateApiKey, keyPrefixLength } from "../src/auth/api-key-secret.js";
import type { Clock } from "../src/clock.js";
import { CustomerRow } from "../src/customers/customer.entity.js";
import { entities } from "../src/entities.js";
import { recountLists } from "../src/db/list-counts.js";
import { ledgerLinesSql } from "../src/ledger/entries.js";
import { mergeBalanceTotals } from "../src/ledger/totals.js";
import { jobRowOf } from "../src/objects/change.js";
import { eventOf } from "../src/objects/resource.js";
import { columnValue, insertShapeOf } from "../src/db/statement.js";
import { EventRow } from "../src/events/event.entity.js";
import { JobRow } from "../src/jobs/job.entity.js";
import { jobKinds } from "../src/jobs/kinds.js";
import { jobFor } from "../src/jobs/runner.js";
import { newId, randomBase62 } from "../src/ids.js";
import { MerchantRow } from "../src/merchants/merchant.entity.js";
import { ProfileRow } from "../src/merchants/profile.entity.js";
import { PaymentRow, type PaymentStatusWord } from "../src/payments/payment.entity.js";
import { authorizationValidityMs } from "../src/payments/states.js";
import { paymentResource } from "../src/payments/store.js";
import { newReference } from "../src/processors/sandbox.js";
import { RefundRow } from "../src/refunds/refund.entity.js";
import { refundResource } from "../src/refunds/store.js";
import { seedKeysFile } from "./service.js";

const day = 24 * 60 * 60 * 1000;
/** Every seeded profile's fees and settlement delay: a typical card rate, two days. */
const seededPricing = { processingFeeBps: 290, settlementDelayDays: 2 } as const;

/**
 * The balance transactions, ledger lines and running totals the writer would have written with the
 * seeded payments and refunds (decisions §11): a captured payment's credit less the profile's fee,
 * dated by its creation and pending for the delay; a succeeded refund's debit, dated by its outcome.
 * Written from the loaded rows in two statements rather than streamed with them: the load
 * bypasses the writer, and `npm run ledger:verify` on the seed checks that this agrees with it.
 */
async function loadLedger(dataSource: DataSource): Promise<void> {
  await dataSource.query(`
    INSERT INTO balance_transactions (merchant_id, livemode, balance_transaction_id, profile_id, type, amount, fee, net, currency, source_id,
                                      available_on, created, line_accounts, line_amounts)
    SELECT merchant_id, livemode, 'txn_' || replace(gen_random_uuid()::text, '-', ''), profile_id, type, amount, fee, net, currency,
           source_id, created + make_interval(days => delay), created, ${ledgerLinesSql.accounts}, ${ledgerLinesSql.amounts}
      FROM (SELECT *, amount - fee AS net FROM (
        SELECT p.merchant_id, p.livemode, p.profile_id, 'payment' AS type, p.amount_received AS amount,
               (p.amount_received * f.processing_fee_bps + 5000) / 10000 AS fee, p.currency, p.payment_id AS source_id, p.created,
               f.settlement_delay_days AS delay
          FROM payments AS p JOIN profiles AS f USING (profile_id) WHERE p.status = 'succeeded' AND p.amount_received > 0
        UNION ALL
        SELECT merchant_id, livemode, profile_id, 'refund', -amount, 0, currency, refund_id, updated, 0
          FROM refunds WHERE status = 'succeeded'
      ) AS movement) AS priced`);
  await dataSource.query(`
    INSERT INTO balance_totals (merchant_id, livemode, currency, type, created_hour, available_hour, count, amount, fee, net)
    SELECT merchant_id, livemode, currency, type, date_trunc('hour', created, 'UTC'), date_trunc('hour', available_on, 'UTC'),
           count(*), sum(amount), sum(fee), sum(net)
      FROM balance_transactions GROUP BY 1, 2, 3, 4, 5, 6`);
}
/** How far back the payments go. */
const spanMs = 180 * day;
/** Payments per load transaction: big enough for COPY to stream, small enough to keep events in time order. */
const batchPayments = 20_000;

/** A seeded generator (mulberry32), so that two seeds of one size hold the same distribution. */
function generator(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = generator(20_261_126);

/** One of `choices` with the given weights. */
function pick<T>(choices: readonly (readonly [T, number])[]): T {
  let r = random() * choices.reduce((sum, [, weight]) => sum + weight, 0);
  for (const [choice, weight] of choices) {
    r -= weight;
    if (r < 0) return choice;
  }
  return choices[choices.length - 1]![0];
}

/** An index into cumulative weights `cumulative` (ascending, last is the total). */
function weightedIndex(cumulative: Float64Array): number {
  const r = random() * cumulative[cumulative.length - 1]!;
  let low = 0;
  let high = cumulative.length - 1;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (cumulative[mid]! > r) high = mid;
    else low = mid + 1;
  }
  return low;
}

/** A value as a field of COPY's text format. */
function copyField(value: unknown): string {
  if (value === null || value === undefined) return "\\N";
  if (value instanceof Date) return value.toISOString();
  if (Buffer.isBuffer(value)) return `\\\\x${value.toString("hex")}`;
  if (typeof value === "boolean") return value ? "t" : "f";
  return String(value).replace(/[\\\n\r\t]/g, (c) => ({ "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" })[c]!);
}

/** Rows of one table waiting for COPY, as text lines in the column order of the service's own INSERTs. */
class CopyBuffer {
  private lines: string[] = [];
  constructor(readonly metadata: EntityMetadata) {}

  /** Takes the rows buffered so far, leaving the buffer empty for the next load. */
  take(): string[] {
    const lines = this.lines;
    this.lines = [];
    return lines;
  }

  add(entity: object): void {
    this.lines.push(
      `${insertShapeOf(this.metadata)
        .columns.map((c) => copyField(columnValue(c, entity)))
        .join("\t")}\n`,
    );
  }

  /** Streams `lines` (taken from this buffer) into the table on `client`. */
  async copy(client: pg.PoolClient, lines: readonly string[]): Promise<number> {
    if (lines.length === 0) return 0;
    const { names } = insertShapeOf(this.metadata);
    await pipeline(Readable.from(lines), client.query(copyFrom(`COPY "${this.metadata.tableName}" (${names}) FROM STDIN`)));
    return lines.length;
  }
}

/** A clock standing still at `at`: events and rows take their time from it. */
function at(time: number): Clock {
  const date = new Date(time);
  return { now: () => date };
}

interface Merchant {
  readonly merchantId: string;
  readonly profileId: string;
  readonly apiKey: string;
  readonly customers: string[];
  payments: number;
}

/** Something the seed writes at a moment: rows go to the load transaction of that moment's window. */
interface Pending {
  readonly time: number;
  readonly write: () => void;
}

/** What is still to be written, earliest first (a binary heap), so rows and events go out in the order they happened. */
class Timeline {
  private readonly heap: Pending[] = [];

  push(item: Pending): void {
    const heap = this.heap;
    heap.push(item);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (heap[parent]!.time <= item.time) break;
      heap[i] = heap[parent]!;
      i = parent;
    }
    heap[i] = item;
  }

  /** Writes, in time order, everything up to `until`, including what those writes schedule up to then. */
  writeUntil(until: number): void {
    const heap = this.heap;
    while (heap.length > 0 && heap[0]!.time <= until) {
      const first = heap[0]!;
      const last = heap.pop()!;
      if (heap.length > 0) {
        let i = 0;
        for (;;) {
          const left = 2 * i + 1;
          if (left >= heap.length) break;
          const child = left + 1 < heap.length && heap[left + 1]!.time < heap[left]!.time ? left + 1 : left;
          if (heap[child]!.time >= last.time) break;
          heap[i] = heap[child]!;
          i = child;
        }
        heap[i] = last;
      }
      first.write();
    }
  }
}

const statuses: readonly (readonly [PaymentStatusWord, number])[] = [
  ["succeeded", 72],
  ["failed", 8],
  ["cancelled", 5],
  ["requires_capture", 3],
  ["requires_payment_method", 7],
  ["requires_confirmation", 2],
  ["requires_action", 3],
];
const declines = [
  ["card_declined", "Your card was declined."],
  ["insufficient_funds", "Your card has insufficient funds."],
] as const;

async function main(): Promise<void> {
  const url = process.env.DATABASE_URL;
  if (url === undefined) throw new Error("DATABASE_URL names the migrated, empty database to seed");
  const payments = Number(process.env.SEED_PAYMENTS ?? 5_000_000);
  if (!Number.isSafeInteger(payments) || payments < 5_000) throw new Error("SEED_PAYMENTS must be a whole number of 5,000 or more");
  const merchantCount = Math.round(payments / 5_000);
  const customerCount = Math.round(payments / 50);
  const refundsWanted = Math.round(payments / 10);
  const hasher = new ApiKeyHasher(Buffer.from(process.env.API_KEY_HASH_SECRET ?? "bench-api-key-hash-secret-32chars", "utf8"));

  const dataSource = new DataSource({ type: "postgres", url, entities, logging: false, poolSize: 2 });
  await dataSource.initialize();
  const pool = (dataSource.driver as PostgresDriver).master as pg.Pool;
  const [{ n }] = (await dataSource.query("SELECT count(*)::int AS n FROM merchants")) as [{ n: number }];
  if (n !== 0) throw new Error("the database already holds merchants: seed a freshly migrated one");

  const buffers = new Map<EntityTarget<object>, CopyBuffer>();
  const buffer = (entity: EntityTarget<object>) => {
    let b = buffers.get(entity);
    if (b === undefined) {
      b = new CopyBuffer(dataSource.getMetadata(entity));
      buffers.set(entity, b);
    }
    return b;
  };
  const eventBuffer = new CopyBuffer(dataSource.getMetadata(EventRow));
  const writeEvent = (event: EventRow) => eventBuffer.add(event);
  const loaded = new Map<string, number>();
  /** One load transaction: every buffered row, parents first; the session skips foreign-key triggers (the seed's rows are consistent by construction). */
  async function load(): Promise<void> {
    const tables = [...[MerchantRow, ProfileRow, ApiKeyRow, CustomerRow, PaymentRow, RefundRow, JobRow].map(buffer), eventBuffer].map(
      (b) => ({ b, lines: b.take() }),
    );
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("SET LOCAL session_replication_role = replica");
      for (const { b, lines } of tables) {
        loaded.set(b.metadata.tableName, (loaded.get(b.metadata.tableName) ?? 0) + (await b.copy(client, lines)));
      }
      await client.query("COMMIT");
    } catch (error) {
      await client.query("ROLLBACK");
      throw error;
    } finally {
      client.release();
    }
  }

  const started = Date.now();
  const end = Date.now() - 60_000;
  const start = end - spanMs;

  // Merchants, their default profiles and keys; weights 1/√rank, so the largest holds ≈1.6 % of the payments (80,000 of 5 million).
  const merchants: Merchant[] = [];
  const cumulative = new Float64Array(merchantCount);
  let total = 0;
  for (let i = 0; i < merchantCount; i++) {
    const created = new Date(start - 30 * day - random() * 180 * day);
    const merchantId = newId("mer");
    const profileId = newId("pro");
    buffer(MerchantRow).add(
      Object.assign(new MerchantRow(), { merchantId, merchantName: `Seed merchant ${i + 1}`, defaultProfileId: profileId, created }),
    );
    buffer(ProfileRow).add(
      Object.assign(new ProfileRow(), {
        profileId,
        merchantId,
        profileName: "default",
        returnUrl: null,
        webhookUrl: null,
        webhookSecret: `whsec_${randomBase62(32)}`,
        previousWebhookSecret: null,
        previousWebhookSecretUntil: null,
        processingFeeBps: seededPricing.processingFeeBps,
        disputeFee: 0n,
        settlementDelayDays: seededPricing.settlementDelayDays,
        created,
      }),
    );
    const apiKey = generateApiKey(false, false);
    buffer(ApiKeyRow).add(
      Object.assign(new ApiKeyRow(), {
        keyId: newId("key"),
        merchantId,
        name: "seed",
        livemode: false,
        publishable: false,
        prefix: apiKey.slice(0, keyPrefixLength),
        keyHash: hasher.hash(apiKey),
        hashSecretId: hasher.secretId,
        created,
        expiresAt: null,
        revokedAt: null,
      }),
    );
    merchants.push({ merchantId, profileId, apiKey, customers: [], payments: 0 });
    total += 1 / Math.sqrt(i + 1);
    cumulative[i] = total;
  }
  // Customers, spread over the merchants as their payments are, created before and during the span.
  for (let i = 0; i < customerCount; i++) {
    const merchant = merchants[weightedIndex(cumulative)]!;
    const customerId = newId("cus");
    const created = new Date(start - 60 * day + random() * (spanMs + 60 * day) * 0.5);
    buffer(CustomerRow).add(
      Object.assign(new CustomerRow(), {
        merchantId: merchant.merchantId,
        customerId,
        livemode: false,
        email: `${customerId.toLowerCase()}@example.com`,
        name: `Customer ${i + 1}`,
        phone: null,
        phoneCountryCode: null,
        description: null,
        address: null,
        metadata: {},
        created,
        updated: created,
        deletedAt: null,
      }),
    );
    merchant.customers.push(customerId);
  }
  await load();

  // Payments in time order; what happens to each later (a cancel, a refund) waits for its own window.
  const refundChance = refundsWanted / (payments * 0.72);
  const pending = new Timeline();
  let written = 0;
  let inFlight: Promise<void> = Promise.resolve();
  for (let first = 0; first < payments; first += batchPayments) {
    const last = Math.min(payments, first + batchPayments);
    const windowEnd = start + (last / payments) * spanMs;
    for (let i = first; i < last; i++) {
      const created = start + ((i + random()) / payments) * spanMs;
      const merchant = merchants[weightedIndex(cumulative)]!;
      merchant.payments++;
      pending.push({ time: created, write: () => seedPayment(merchant, created) });
    }
    pending.writeUntil(windowEnd);
    await inFlight;
    inFlight = load();
    written = last;
    if (last % 500_000 === 0 || last === payments) {
      console.log(JSON.stringify({ payments: written, seconds: Math.round((Date.now() - started) / 1000) }));
    }
  }
  await inFlight;
  pending.writeUntil(Number.POSITIVE_INFINITY);
  await load();

  function seedPayment(merchant: Merchant, created: number): void {
    const status = pick(statuses);
    const captureMethod = status === "requires_capture" || random() < 0.1 ? "manual" : "automatic";
    // An authorization nobody captured expires after 7 days (the expiry job).
    const expires = status === "requires_capture" && created + authorizationValidityMs < end;
    const confirmed = status !== "requires_payment_method" && status !== "requires_confirmation";
    const amount = BigInt(Math.max(50, Math.round(Math.exp(7.5 + random() * 2.5))));
    const customerId =
      merchant.customers.length > 0 && random() < 0.6 ? merchant.customers[Math.floor(random() * merchant.customers.length)]! : null;
    const paymentId = newId("pay");
    const row: PaymentRow = Object.assign(new PaymentRow(), {
      merchantId: merchant.merchantId,
      livemode: false,
      paymentId,
      profileId: merchant.profileId,
      status: confirmed ? status : "requires_payment_method",
      amount,
      currency: pick([
        ["USD", 80],
        ["EUR", 15],
        ["GBP", 5],
      ] as const),
      amountCapturable: 0n,
      amountReceived: null,
      captureMethod,
      captureOn: null,
      paymentMethod: confirmed ? "card" : null,
      paymentMethodType: null,
      paymentMethodId: null,
      card: confirmed ? { last4: "4242", brand: "visa", exp_month: "12", exp_year: "2035" } : null,
      customerId,
      setupFutureUsage: null,
      offSession: false,
      mandateId: null,
      mandateRequest: null,
      email: customerId === null ? null : `${customerId.toLowerCase()}@example.com`,
      description: random() < 0.5 ? `Order ${Math.floor(random() * 1e6)}` : null,
      statementDescriptor: null,
      returnUrl: null,
      clientSecret: `${paymentId}_secret_${randomBase62(24)}`,
      nextAction: null,
      errorCode: null,
      errorMessage: null,
      cancellationReason: null,
      metadata: random() < 0.3 ? { order_id: String(Math.floor(random() * 1e7)) } : {},
      processor: confirmed ? "sandbox" : null,
      processorReference: confirmed ? newReference() : null,
      authenticationToken: null,
      created: new Date(created),
      modifiedAt: new Date(created),
      claimToken: null,
      claimedUntil: null,
    });
    if (status === "succeeded") {
      row.amountReceived = amount;
    } else if (status === "failed") {
      const [code, message] = declines[Math.floor(random() * declines.length)]!;
      row.errorCode = code;
      row.errorMessage = message;
    } else if (status === "requires_capture" || status === "cancelled") {
      row.status = "requires_capture";
      row.amountCapturable = amount;
    } else if (status === "requires_action") {
      row.authenticationToken = randomBase62(40);
      row.nextAction = { type: "redirect_to_url", redirect_to_url: `http://localhost:8080/3ds/${row.authenticationToken}` };
    }
    // The create (with confirm when the payment has a method) writes the row and its first event.
    writeEvent(eventOf(paymentResource, row, at(created)));
    if (status === "requires_confirmation") {
      const updated = created + 30_000 + random() * 3_600_000;
      pending.push({
        time: updated,
        write: () => {
          row.status = "requires_confirmation";
          row.modifiedAt = new Date(updated);
          writeEvent(eventOf(paymentResource, row, at(updated)));
          buffer(PaymentRow).add(row);
        },
      });
      return;
    }
    if (status === "cancelled" || expires) {
      const cancelled = expires ? created + authorizationValidityMs : created + 60_000 + random() * 2 * day;
      pending.push({
        time: Math.min(cancelled, end),
        write: () => {
          row.status = "cancelled";
          row.cancellationReason = expires ? "expired" : "requested_by_customer";
          row.amountCapturable = 0n;
          row.modifiedAt = new Date(Math.min(cancelled, end));
          writeEvent(eventOf(paymentResource, row, at(row.modifiedAt.getTime())));
          buffer(PaymentRow).add(row);
        },
      });
      return;
    }
    buffer(PaymentRow).add(row);
    if (status === "requires_capture") {
      buffer(JobRow).add(
        jobRowOf(jobFor(jobKinds.expireAuthorization, row, paymentId, new Date(created + authorizationValidityMs)), at(created)),
      );
    }
    if (status === "succeeded" && random() < refundChance) {
      const refundAt = Math.min(end, created + 3_600_000 + random() * 14 * day);
      pending.push({ time: refundAt, write: () => seedRefund(row, refundAt) });
    }
  }

  function seedRefund(payment: PaymentRow, created: number): void {
    const scheduled = random() < 0.2;
    const decided = created + (scheduled ? 3_600_000 + random() * 20 * 3_600_000 : 1_000 + random() * 2_000);
    const row: RefundRow = Object.assign(new RefundRow(), {
      merchantId: payment.merchantId,
      livemode: false,
      refundId: newId("ref"),
      paymentId: payment.paymentId,
      profileId: payment.profileId,
      status: "pending",
      amount: random() < 0.7 ? payment.amount : BigInt(Math.max(1, Math.floor(Number(payment.amount) * random()))),
      currency: payment.currency,
      reason: pick([
        ["requested_by_customer", 70],
        ["duplicate", 20],
        ["fraudulent", 10],
      ] as const),
      refundType: scheduled ? "scheduled" : "instant",
      errorCode: null,
      errorMessage: null,
      metadata: {},
      processorReference: null,
      created: new Date(created),
      updated: new Date(created),
      claimToken: null,
      claimedUntil: null,
    });
    writeEvent(eventOf(refundResource, row, at(created)));
    const outcome = pick([
      ["succeeded", 94],
      ["failed", 3],
      ["manual_review", 2],
      ["cancelled", scheduled ? 1 : 0],
    ] as const);
    pending.push({
      time: Math.min(decided, end),
      write: () => {
        row.status = outcome;
        row.updated = new Date(Math.min(decided, end));
        if (outcome !== "cancelled") row.processorReference = newReference();
        if (outcome === "failed") {
          row.errorCode = "refund_declined";
          row.errorMessage = "The card issuer declined the refund.";
        }
        writeEvent(eventOf(refundResource, row, at(row.updated.getTime())));
        buffer(RefundRow).add(row);
      },
    });
  }

  const copied = Math.round((Date.now() - started) / 1000);
  // The load skipped the triggers that count payments and events as they are written.
  await recountLists(dataSource);
  await loadLedger(dataSource);
  // As the job runner would have done through the months the seed spans.
  await mergeBalanceTotals(dataSource, new Date());
  // Merged and folded at once, the load's deltas leave the table eight times the size of its rows
  // (888 MB for 726,000 at 5 million payments), where the runner's merges every 2 s reuse the space as
  // they go: without compaction every delta of a benchmark lands on a page of its own, and each
  // merge's vacuum visits them all (150–190 ms after a burst, against 96 MB compacted).
  await dataSource.query("VACUUM (FULL) balance_totals");
  // Hint bits and the visibility map, so lists count by index-only scans from the first request.
  for (const table of [
    "merchants",
    "profiles",
    "api_keys",
    "customers",
    "payments",
    "list_counts",
    "refunds",
    "events",
    "jobs",
    "balance_transactions",
    "balance_totals",
  ]) {
    await dataSource.query(`VACUUM (ANALYZE) "${table}"`);
  }
  // Written out now, or a benchmark right after the seed shares the disk with the load's checkpoint.
  await dataSource.query("CHECKPOINT");
  const seconds = Math.round((Date.now() - started) / 1000);
  merchants.sort((a, b) => b.payments - a.payments);
  writeFileSync(
    seedKeysFile,
    `${JSON.stringify(
      merchants.map((m) => ({ merchant_id: m.merchantId, profile_id: m.profileId, api_key: m.apiKey, payments: m.payments })),
      null,
      1,
    )}\n`,
  );
  console.log(JSON.stringify({ rows: Object.fromEntries(loaded), copySeconds: copied, totalSeconds: seconds, keysFile: seedKeysFile }));
  await dataSource.destroy();
}

await main();
