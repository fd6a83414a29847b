/*
 * What the benchmarks share: the service they start (`npm start` on a database of their own) and the
 * merchant they call it as.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import readline from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { listeningUrl } from "../test/support/server-log.js";

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

/**
 * Starts the service of this checkout with `workers` workers on `databaseUrl`, with `env` on top of
 * the benchmark's settings; resolves once it listens. `built` runs the production build as `npm
 * start` does (building it if stale), which the memory figures need: tsx's loader adds about 120 MB.
 */
export async function startServer(
  databaseUrl: string,
  workers: string,
  env: Record<string, string> = {},
  built = false,
): Promise<{ url: string; adminKey: string; child: ChildProcess }> {
  const adminKey = "bench-admin-api-key";
  const child = spawn(process.execPath, built ? ["src/start.mjs"] : ["--import", "tsx", "src/server.ts"], {
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
      ...env,
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = readline.createInterface({ input: child.stdout! });
  for await (const line of lines) {
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

/**
 * Stops the service a benchmark started, if it did and it still runs. A runner may wait for a pass
 * over a whole backlog before its instance exits, which the next run, on a fresh database, does not
 * need: after a few seconds the service is killed.
 */
export async function stopServer(child: ChildProcess | undefined): Promise<void> {
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const timeout = sleep(5000).then(() => "timeout" as const);
  if ((await Promise.race([exited, timeout])) === "timeout") {
    child.kill("SIGKILL");
    await exited;
  }
}

/** Least-squares slope of `y` over `x`: about 0 when a sampled figure (a backlog, a table, memory) stays flat. */
export function slope(points: readonly { x: number; y: number }[]): number {
  const n = points.length;
  const meanX = points.reduce((sum, p) => sum + p.x, 0) / n;
  const meanY = points.reduce((sum, p) => sum + p.y, 0) / n;
  const covariance = points.reduce((sum, p) => sum + (p.x - meanX) * (p.y - meanY), 0);
  const variance = points.reduce((sum, p) => sum + (p.x - meanX) ** 2, 0);
  return covariance / variance;
}
