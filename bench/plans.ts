/*
 * `npm run bench:plans`: the plan of every statement the service runs for each list, retrieve and
 * create/confirm request, on a database `npm run bench:seed` filled (docs/performance.md, "Grown
 * database"). The service runs in this process on DATABASE_URL with auto_explain loaded into each of
 * its connections (PGOPTIONS, so superuser), which sends `EXPLAIN (ANALYZE, BUFFERS)` of every
 * statement back as a notice; the plans are those of the statements as the service sends them,
 * prepared ones included (a generic plan shows `$1` where a custom one shows the value).
 *
 * The requests are made as the merchant with the most payments (SEED_KEYS_FILE, default
 * bench/seed-keys.json), and each is sent `PLAN_RUNS` times (default 7: a named prepared statement
 * goes generic from its sixth execution); the plans of the last run are printed.
 */
import type pg from "pg";
import type { PostgresDriver } from "typeorm/driver/postgres/PostgresDriver.js";
import { card } from "./flows.js";
import { largestSeedMerchant } from "./service.js";

process.env.PGOPTIONS = [
  "-c session_preload_libraries=auto_explain",
  "-c auto_explain.log_min_duration=0",
  "-c auto_explain.log_analyze=on",
  "-c auto_explain.log_buffers=on",
  "-c auto_explain.log_timing=on",
  "-c auto_explain.log_nested_statements=on",
  "-c auto_explain.log_level=notice",
  "-c client_min_messages=notice",
].join(" ");
process.env.PORT = "0";
process.env.API_KEY_HASH_SECRET ??= "bench-api-key-hash-secret-32chars";
process.env.DATA_ENCRYPTION_KEY ??= "00".repeat(32);
process.env.ADMIN_API_KEY ??= "bench-admin-api-key";
process.env.RATE_LIMIT_PER_MINUTE = "1000000000";
process.env.MIGRATE_ON_START = "false";
process.env.LOG_LEVEL ??= "warn";
// The seed's events go back 180 days: a shorter retention would have the reaper deleting them meanwhile.
process.env.EVENT_RETENTION_DAYS ??= "3650";

// Imported after PGOPTIONS is set, so that every connection the app opens loads auto_explain.
const { openApp, serve } = await import("../src/app.js");
const { loadConfig } = await import("../src/config.js");

const merchant = largestSeedMerchant();
const runs = Number(process.env.PLAN_RUNS ?? 7);

const service = await serve(await openApp(loadConfig()));
const pool = (service.app.dataSource.driver as PostgresDriver).master as pg.Pool & { _clients: pg.Client[] };
let notices: string[] = [];
const listening = new WeakSet<pg.Client>();
const listen = (client: pg.Client) => {
  if (listening.has(client)) return;
  listening.add(client);
  client.on("notice", (notice) => notices.push(notice.message ?? ""));
};
for (const client of pool._clients) listen(client);
pool.on("connect", listen);

/** Statements of the job runner, the reapers and the statistics check, which run beside requests. */
const background =
  /^Query Text: (WITH due AS MATERIALIZED|DELETE FROM events WHERE event_id = ANY|DELETE FROM idempotency_keys WHERE ctid|DELETE FROM jobs WHERE job_id = \$1 AND run_at|SELECT s\.relname AS name FROM pg_stat_user_tables)/m;

async function call(method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(service.url + path, {
    method,
    headers: { "content-type": "application/json", "api-key": merchant.api_key, "admin-api-key": process.env.ADMIN_API_KEY! },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = (await res.json()) as Record<string, unknown>;
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(answer)}`);
  return answer;
}

/** Sends the request `runs` times and prints the plans of the statements its last run made. */
async function plans(title: string, method: string, path: () => string, body?: () => unknown): Promise<Record<string, unknown>> {
  let answer: Record<string, unknown> = {};
  let sent = "";
  for (let i = 0; i < runs; i++) {
    notices = [];
    sent = path();
    answer = await call(method, sent, body?.());
  }
  // Notices of the last statements can trail the answer by a moment.
  await new Promise((resolve) => setTimeout(resolve, 50));
  console.log(`\n### ${title}\n\n\`${method} ${sent}\`\n\n\`\`\`text`);
  for (const notice of notices.filter((n) => !background.test(n))) console.log(notice.replace(/^duration: /, "-- duration: "));
  console.log("```");
  return answer;
}

const db = service.app.dataSource;
const [customer] = (await db.query(
  `SELECT customer_id FROM payments WHERE merchant_id = $1 AND livemode = false AND customer_id IS NOT NULL
    GROUP BY customer_id ORDER BY count(*) DESC LIMIT 1`,
  [merchant.merchant_id],
)) as { customer_id: string }[];
const [payment] = (await db.query(
  `SELECT payment_id FROM payments WHERE merchant_id = $1 AND livemode = false AND status = 'succeeded' ORDER BY created DESC OFFSET 100 LIMIT 1`,
  [merchant.merchant_id],
)) as { payment_id: string }[];
const [refunded] = (await db.query(
  `SELECT payment_id FROM refunds WHERE merchant_id = $1 AND livemode = false ORDER BY created DESC OFFSET 50 LIMIT 1`,
  [merchant.merchant_id],
)) as { payment_id: string }[];
const month = (ago: number) => new Date(Date.now() - ago * 30 * 24 * 60 * 60 * 1000).toISOString();
console.log(`Merchant ${merchant.merchant_id} (${merchant.payments} payments), customer ${customer!.customer_id}; ${runs} runs each.`);

const pay = payment!.payment_id;
await plans("Payments, newest first", "GET", () => "/payments/list?limit=10");
await plans("Payments of one customer", "GET", () => `/payments/list?limit=10&customer_id=${customer!.customer_id}`);
await plans("Payments by status (failed)", "GET", () => "/payments/list?limit=10&status=failed");
await plans("Payments by status (succeeded)", "GET", () => "/payments/list?limit=10&status=succeeded");
await plans(
  "Payments created in one month, two months ago",
  "GET",
  () => `/payments/list?limit=10&created_gte=${month(3)}&created_lte=${month(2)}`,
);
await plans("Payments, a deep page", "GET", () => "/payments/list?limit=10&offset=1000");
await plans("Retrieve a payment", "GET", () => `/payments/${pay}`);
await plans("Refunds, newest first", "GET", () => "/refunds/list?limit=10");
await plans("Refunds of one payment", "GET", () => `/refunds/list?limit=10&payment_id=${refunded!.payment_id}`);
await plans("Refunds by status (failed)", "GET", () => "/refunds/list?limit=10&status=failed");
await plans("Customers, newest first", "GET", () => "/customers/list?limit=10");
await plans("Customers by email", "GET", () => `/customers/list?limit=10&email=${customer!.customer_id.toLowerCase()}%40example.com`);
await plans("Events, newest first", "GET", () => "/events/list?limit=10");
await plans("Events of one type", "GET", () => "/events/list?limit=10&type=payment.failed");
await plans("Events of one object", "GET", () => `/events/list?limit=10&object_id=${pay}`);
await plans("Payouts", "GET", () => "/payouts/list?limit=10");
await plans("Disputes", "GET", () => "/disputes/list?limit=10");
await plans("API keys", "GET", () => `/api-keys?merchant_id=${merchant.merchant_id}&limit=10`);
await plans(
  "Create with confirm",
  "POST",
  () => "/payments",
  () => ({
    amount: 1000,
    currency: "USD",
    profile_id: merchant.profile_id,
    confirm: true,
    payment_method_data: { card },
  }),
);
let created = "";
await plans(
  "Create (no confirm)",
  "POST",
  () => "/payments",
  () => ({ amount: 1000, currency: "USD", profile_id: merchant.profile_id }),
).then((answer) => {
  created = String(answer.payment_id);
});
// Each run confirms a payment of its own, created just before (outside the plans shown).
const toConfirm: string[] = [];
for (let i = 0; i < runs; i++) {
  toConfirm.push(String((await call("POST", "/payments", { amount: 1000, currency: "USD", profile_id: merchant.profile_id })).payment_id));
}
toConfirm.push(created);
await plans(
  "Confirm",
  "POST",
  () => `/payments/${toConfirm.shift()}/confirm`,
  () => ({ payment_method_data: { card } }),
);

await service.close({ drainDelayMs: 0, graceMs: 1000 });
// The webhook sender's thread and the pools may keep the event loop alive for a while after close.
process.exit(0);
