/*
 * The realistic-mix scenario of `npm run bench`: what a merchant's traffic looks like rather than one
 * call over and over. Of the requests, 55 % create with confirm, 10 % are two-step checkouts (create
 * with the secret key, confirm with the publishable key and client_secret), 10 % manual captures
 * (authorize, then capture), 10 % partial refunds of paid payments, 10 % retrieves and 5 % lists.
 * Once the load stops, it times how long the refunds' jobs take to drain.
 *
 * Driven by a loop of its own over undici's keep-alive pool rather than autocannon: the calls depend
 * on earlier answers (a capture needs the authorization's id, a refund a paid payment, a checkout's
 * confirm the client_secret), the flows are picked at random by weight instead of in one fixed
 * sequence per connection, and each kind of call gets its own latency and errors.
 */
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { Pool } from "undici";
import { rest } from "./flows.js";
import { type BenchMerchant, countOf, percentile } from "./service.js";

/** A kind of call of the mix: its figures are kept apart. */
type Call =
  | "create with confirm"
  | "checkout create"
  | "checkout confirm"
  | "authorize"
  | "capture"
  | "partial refund"
  | "retrieve"
  | "list";

/** One flow and its weight among flows: 11 + 1×2 + 1×2 + 2 + 2 + 1 = 20 requests in 18 flows, so each weight×requests / 20 is the share above. */
const flows = [
  { name: "create with confirm", weight: 11 },
  { name: "two-step checkout", weight: 1 },
  { name: "manual capture", weight: 1 },
  { name: "partial refund", weight: 2 },
  { name: "retrieve", weight: 2 },
  { name: "list", weight: 1 },
] as const;
const totalWeight = flows.reduce((sum, f) => sum + f.weight, 0);

/** Paid payments made before the clock starts, so that the first refunds and retrieves have something to act on. */
const seedPayments = 100;
/** Payments a retrieve picks from: the most recent ones. */
const recentKept = 1000;
/** How long the drain is waited for before it is reported as not drained. */
const drainLimitMs = 60_000;

/** The figures of one kind of call. */
export interface CallFigures {
  readonly call: Call;
  readonly requests: number;
  readonly p50: number;
  readonly p99: number;
  readonly errors: number;
}

/** What the mix measured. */
export interface MixResult {
  readonly seconds: number;
  readonly operationsPerSecond: number;
  readonly requests: number;
  readonly p50: number;
  readonly p99: number;
  readonly errors: number;
  readonly calls: readonly CallFigures[];
  /** From the last answer to the moment no job of the merchant was pending and no refund pending; undefined if that took over a minute. */
  readonly drainMs: number | undefined;
  /** Refunds that ended failed instead of succeeded (counted in errors too). */
  readonly failedRefunds: number;
  /** The first few errors, as answered. */
  readonly firstErrors: readonly string[];
}

/**
 * Runs the mix for `seconds` with `connections` concurrent flows (one keep-alive connection each)
 * as `merchant`, then waits for its jobs to drain, read from the jobs table at `databaseUrl` and
 * from the refunds' statuses.
 */
export async function measureMix(
  url: string,
  merchant: BenchMerchant,
  databaseUrl: string,
  options: { connections: number; seconds: number },
): Promise<MixResult> {
  const pool = new Pool(url, { connections: options.connections, keepAliveTimeout: 60_000, keepAliveMaxTimeout: 60_000 });
  const latencies = new Map<Call, number[]>();
  const errors = new Map<Call, number>();
  const firstErrors: string[] = [];
  const refundable: string[] = [];
  const recent: string[] = [];
  const secret = { "content-type": "application/json", "api-key": merchant.apiKey };

  const fail = (call: Call, what: string) => {
    errors.set(call, (errors.get(call) ?? 0) + 1);
    if (firstErrors.length < 5) firstErrors.push(`${call}: ${what}`);
  };
  /** One request; its answer's body when it is a 200 (and has `expect.status` if given), else undefined and an error counted. */
  const request = async (
    call: Call,
    method: "GET" | "POST",
    path: string,
    options: { body?: unknown; headers?: Record<string, string>; status?: string } = {},
  ): Promise<Record<string, unknown> | undefined> => {
    const started = performance.now();
    try {
      const res = await pool.request({
        method,
        path,
        headers: options.headers ?? secret,
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
      });
      const text = await res.body.text();
      const list = latencies.get(call) ?? [];
      if (list.length === 0) latencies.set(call, list);
      list.push(performance.now() - started);
      if (res.statusCode !== 200) return void fail(call, `${res.statusCode} ${text.slice(0, 300)}`);
      const body = JSON.parse(text) as Record<string, unknown>;
      if (options.status !== undefined && body.status !== options.status) return void fail(call, `status ${String(body.status)}`);
      return body;
    } catch (error) {
      return void fail(call, String(error));
    }
  };
  const paid = (id: string) => {
    refundable.push(id);
    recent.push(id);
    if (recent.length > recentKept) recent.splice(0, recent.length - recentKept);
  };
  const createWithConfirm = async () => {
    const body = await request("create with confirm", "POST", "/payments", {
      body: rest.create(merchant.profileId, { confirm: true }),
      status: "succeeded",
    });
    if (body !== undefined) paid(body.payment_id as string);
  };

  const run: Record<(typeof flows)[number]["name"], () => Promise<void>> = {
    "create with confirm": createWithConfirm,
    "two-step checkout": async () => {
      const created = await request("checkout create", "POST", "/payments", { body: rest.create(merchant.profileId) });
      if (created === undefined) return;
      const confirmed = await request("checkout confirm", "POST", `/payments/${created.payment_id as string}/confirm`, {
        headers: { "content-type": "application/json", "api-key": merchant.publishableKey },
        body: rest.checkoutConfirm(created.client_secret as string),
        status: "succeeded",
      });
      if (confirmed !== undefined) paid(confirmed.payment_id as string);
    },
    "manual capture": async () => {
      const authorized = await request("authorize", "POST", "/payments", {
        body: rest.create(merchant.profileId, { confirm: true, manualCapture: true }),
        status: "requires_capture",
      });
      if (authorized === undefined) return;
      const captured = await request("capture", "POST", `/payments/${authorized.payment_id as string}/capture`, {
        body: {},
        status: "succeeded",
      });
      if (captured !== undefined) paid(captured.payment_id as string);
    },
    // One refund per payment, so refunds never queue behind each other on one payment's lock.
    "partial refund": async () => {
      const id = refundable.pop();
      if (id === undefined) return createWithConfirm();
      await request("partial refund", "POST", "/refunds", { body: rest.refund(id) });
    },
    retrieve: async () => {
      await request("retrieve", "GET", `/payments/${recent[Math.floor(Math.random() * recent.length)]!}`);
    },
    list: async () => {
      await request("list", "GET", "/payments/list?limit=10");
    },
  };
  const pick = () => {
    let r = Math.random() * totalWeight;
    for (const flow of flows) {
      r -= flow.weight;
      if (r < 0) return flow.name;
    }
    return flows[0].name;
  };

  try {
    for (let i = 0; i < seedPayments; i++) await createWithConfirm();
    latencies.clear();
    if (errors.size > 0) throw new Error(`seeding the mix failed: ${firstErrors.join("; ")}`);
    const started = performance.now();
    const deadline = started + options.seconds * 1000;
    // Each loop finishes the flow it is in when time is up, so no authorization is left uncaptured.
    await Promise.all(
      Array.from({ length: options.connections }, async () => {
        while (performance.now() < deadline) await run[pick()]();
      }),
    );
    const loadEnded = performance.now();
    const drainMs = await drainTime(url, merchant, databaseUrl, loadEnded);
    const failedRefunds = await countOf(url, merchant.apiKey, "/refunds/list?status=failed");
    const all = [...latencies.values()].flat().sort((a, b) => a - b);
    const errorCount = [...errors.values()].reduce((n, e) => n + e, 0);
    const elapsed = (loadEnded - started) / 1000;
    return {
      seconds: options.seconds,
      operationsPerSecond: Math.round(all.length / elapsed),
      requests: all.length,
      p50: Math.round(percentile(all, 50)),
      p99: Math.round(percentile(all, 99)),
      errors: errorCount + failedRefunds,
      calls: [...latencies].map(([call, list]) => {
        const sorted = list.sort((a, b) => a - b);
        return {
          call,
          requests: sorted.length,
          p50: Math.round(percentile(sorted, 50)),
          p99: Math.round(percentile(sorted, 99)),
          errors: errors.get(call) ?? 0,
        };
      }),
      drainMs,
      failedRefunds,
      firstErrors,
    };
  } finally {
    await pool.close();
  }
}

/**
 * Polls until the merchant has no pending job in the jobs table and no pending refund; returns how
 * long after `loadEnded` (a `performance.now()`) that was, or undefined after a minute.
 */
async function drainTime(url: string, merchant: BenchMerchant, databaseUrl: string, loadEnded: number): Promise<number | undefined> {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    while (performance.now() - loadEnded < drainLimitMs) {
      const { rows } = await db.query<{ pending: number }>(
        "SELECT count(*)::int AS pending FROM jobs WHERE merchant_id = $1 AND status = 'pending'",
        [merchant.merchantId],
      );
      if (rows[0]!.pending === 0 && (await countOf(url, merchant.apiKey, "/refunds/list?status=pending")) === 0) {
        return Math.round(performance.now() - loadEnded);
      }
      await sleep(50);
    }
    return undefined;
  } finally {
    await db.end();
  }
}
