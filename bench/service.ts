/*
 * What the benchmarks share: the service they start (`npm start` on a database of their own) and the
 * merchant they call it as.
 */
import { spawn, type ChildProcess } from "node:child_process";
import readline from "node:readline";
import pg from "pg";

/** The 4242 test card: the sandbox processor approves it. */
export const card = { card_number: "4242424242424242", card_exp_month: "12", card_exp_year: "2035", card_cvc: "123" };

/** Creates the database if it is missing; `fresh` drops it first (only ever the bench's own database). */
export async function prepareDatabase(url: string, fresh: boolean): Promise<void> {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  const quoted = `"${name.replace(/"/g, '""')}"`;
  const admin = new pg.Client({ connectionString: Object.assign(new URL(url), { pathname: "/postgres" }).toString() });
  await admin.connect();
  if (fresh) await admin.query(`DROP DATABASE IF EXISTS ${quoted} WITH (FORCE)`);
  const exists = await admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
  if (exists.rowCount === 0) await admin.query(`CREATE DATABASE ${quoted}`);
  await admin.end();
}

/** The service's URL if `line` is its "listening" log line. */
function listeningUrl(line: string): string | undefined {
  if (!line.includes('"listening"')) return undefined;
  try {
    const entry = JSON.parse(line) as { message?: string; url?: string };
    return entry.message === "listening" ? entry.url : undefined;
  } catch {
    return undefined;
  }
}

/** Starts the service of this checkout with `workers` workers on `databaseUrl`, as `npm start` does; resolves once it listens. */
export async function startServer(databaseUrl: string, workers: string): Promise<{ url: string; adminKey: string; child: ChildProcess }> {
  const adminKey = "bench-admin-api-key";
  const child = spawn(process.execPath, ["--import", "tsx", "src/server.ts"], {
    env: {
      ...process.env,
      WORKERS: workers,
      PORT: "0",
      DATABASE_URL: databaseUrl,
      ADMIN_API_KEY: adminKey,
      API_KEY_HASH_SECRET: process.env.API_KEY_HASH_SECRET ?? "bench-api-key-hash-secret-32chars",
      DATA_ENCRYPTION_KEY: process.env.DATA_ENCRYPTION_KEY ?? "00".repeat(32),
      RATE_LIMIT_PER_MINUTE: "1000000000",
      SHUTDOWN_DELAY_MS: "0",
      AUTH_FAILURE_LIMIT_PER_MINUTE: "1000000000",
      ADMIN_RATE_LIMIT_PER_MINUTE: "1000000000",
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = readline.createInterface({ input: child.stdout! });
  for await (const line of lines) {
    // pino writes the message after the fields, so the line is read as JSON rather than matched by its order.
    const url = listeningUrl(line);
    if (url !== undefined) {
      // Keep draining the request log so the server never blocks on a full pipe.
      lines.on("line", () => undefined);
      return { url, adminKey, child };
    }
  }
  throw new Error("the server exited before listening");
}

/** A merchant the benchmark calls as: its sandbox secret key, and the publishable key a checkout page uses. */
export interface BenchMerchant {
  readonly merchantId: string;
  readonly profileId: string;
  readonly apiKey: string;
  readonly publishableKey: string;
}

/** A new merchant with a sandbox secret and publishable key, created through the admin API; its default profile sends events to `webhookUrl` when given. */
export async function newMerchant(url: string, adminKey: string, webhookUrl?: string): Promise<BenchMerchant> {
  const post = async (path: string, body: unknown) => {
    const res = await fetch(url + path, {
      method: "POST",
      headers: { "content-type": "application/json", "admin-api-key": adminKey },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as Record<string, string>;
  };
  const merchant = await post("/merchants", { merchant_name: "Bench" });
  const key = await post("/api-keys", { merchant_id: merchant.merchant_id, environment: "sandbox" });
  const publishable = await post("/api-keys", { merchant_id: merchant.merchant_id, environment: "sandbox", kind: "publishable" });
  if (webhookUrl !== undefined) {
    await post(`/merchants/${merchant.merchant_id}/profiles/${merchant.default_profile_id}`, { webhook_url: webhookUrl });
  }
  return {
    merchantId: merchant.merchant_id!,
    profileId: merchant.default_profile_id!,
    apiKey: key.api_key!,
    publishableKey: publishable.api_key!,
  };
}

/** How many of the merchant's objects a list endpoint (`/payments/list?status=…`) counts. */
export async function countOf(url: string, apiKey: string, listPath: string): Promise<number> {
  const res = await fetch(`${url}${listPath}${listPath.includes("?") ? "&" : "?"}limit=1`, { headers: { "api-key": apiKey } });
  if (!res.ok) throw new Error(`${listPath}: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { total_count: number }).total_count;
}

/** The `p`th percentile of ascending `sorted` (0 when empty). */
export function percentile(sorted: readonly number[], p: number): number {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
}

/** The service a benchmark measures, and how it reaches it. */
export interface BenchTarget {
  readonly url: string;
  readonly adminKey: string;
  readonly databaseUrl: string;
  /** The service the benchmark started; undefined when it measures one already running (BENCH_URL). */
  readonly child: ChildProcess | undefined;
}

/**
 * BENCH_URL and BENCH_ADMIN_KEY when set; else the service started with `workers` workers on
 * DATABASE_URL, by default the database `defaultDatabase` of the local PostgreSQL over its Unix
 * socket, created afresh so that every run starts from the same state.
 */
export async function benchTarget(defaultDatabase: string, workers: string): Promise<BenchTarget> {
  const databaseUrl = process.env.DATABASE_URL ?? `postgres://postgres@localhost/${defaultDatabase}?host=/var/run/postgresql`;
  if (process.env.BENCH_URL !== undefined) {
    return { url: process.env.BENCH_URL, adminKey: process.env.BENCH_ADMIN_KEY ?? "", databaseUrl, child: undefined };
  }
  await prepareDatabase(databaseUrl, process.env.DATABASE_URL === undefined);
  const server = await startServer(databaseUrl, workers);
  return { ...server, databaseUrl };
}
