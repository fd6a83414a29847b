/*
 * What the benchmarks share: the service they start (`npm start` on a database of their own) and the
 * merchant they call it as.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { readdirSync, readFileSync } from "node:fs";
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
 * Starts the service of this checkout (or of the checkout at `cwd`) with `workers` workers on
 * `databaseUrl`, with `env` on top of the benchmark's settings; resolves once it listens. It runs the production build as `npm start`
 * does (building it if stale): what production runs, not tsx's loader, which adds about 120 MB and
 * its own helpers on the hot path.
 */
export async function startServer(
  databaseUrl: string,
  workers: string,
  env: Record<string, string> = {},
  cwd?: string,
): Promise<{ url: string; adminKey: string; child: ChildProcess }> {
  const adminKey = "bench-admin-api-key";
  const child = spawn(process.execPath, ["src/start.mjs"], {
    cwd,
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
      CARD_TESTING_LIMIT_PER_MINUTE: "1000000000",
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

/** Resident memory of the process `pid` and every process under it (the cluster's workers, if any), in MB. */
export function rssMb(pid: number): number {
  const parents = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The command may hold spaces and parentheses: the fields after its closing one are fixed.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // Ended while listed.
    }
  }
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) for (const [child, parent] of parents) if (parent === tree[i]) tree.push(child);
  let kilobytes = 0;
  for (const member of tree) {
    const status = readFileSync(`/proc/${member}/status`, "utf8");
    kilobytes += Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  }
  return kilobytes / 1024;
}

/** Whether an instance's memory stayed bounded through a run, judged on its RSS samples. */
export interface MemoryVerdict {
  readonly maxMb: number;
  /** Peak from past start-up (the second minute) to the end of the first third. */
  readonly earlyPeakMb: number;
  readonly earlyFrom: number;
  readonly earlyTo: number;
  /** Peak of the last third. */
  readonly latePeakMb: number;
  /** From past start-up, MB per minute. */
  readonly trendMbPerMinute: number;
  readonly settledFrom: number;
  /** Under `limitMb` throughout, and the last third's peak within 10 % of the early one. */
  readonly bounded: boolean;
}

/**
 * Judges RSS samples (`t` seconds into a run of `seconds`). Memory swings with the collector's cycle
 * (tens of MB between two samples), so growth compares peaks: from past start-up to the first
 * third's end, against the last third.
 */
export function memoryVerdict(samples: readonly { t: number; rssMb: number }[], seconds: number, limitMb: number): MemoryVerdict {
  const settled = samples.filter((s) => s.t >= Math.min(120, seconds / 6));
  const early = settled.filter((s) => s.t <= seconds / 3);
  const lastThird = samples.filter((s) => s.t > (2 * seconds) / 3);
  const maxMb = Math.max(...samples.map((s) => s.rssMb));
  const earlyPeakMb = Math.max(...early.map((s) => s.rssMb));
  const latePeakMb = Math.max(...lastThird.map((s) => s.rssMb));
  return {
    maxMb,
    earlyPeakMb,
    earlyFrom: early[0]!.t,
    earlyTo: early.at(-1)!.t,
    latePeakMb,
    trendMbPerMinute: 60 * slope(settled.map((s) => ({ x: s.t, y: s.rssMb }))),
    settledFrom: settled[0]!.t,
    bounded: maxMb < limitMb && latePeakMb <= 1.1 * earlyPeakMb,
  };
}

/**
 * The PostgreSQL server a run measured, for the report: its version, where it was reached, and the
 * settings that change the figures (durability, and the shared buffers a grown database is read through).
 */
export async function describeDatabase(databaseUrl: string): Promise<string> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ version: string; fsync: string; commit: string; buffers: string }>(
      `SELECT split_part(version(), ' on ', 1) AS version, current_setting('fsync') AS fsync,
              current_setting('synchronous_commit') AS commit, current_setting('shared_buffers') AS buffers`,
    );
    const { version, fsync, commit, buffers } = rows[0]!;
    const via = new URL(databaseUrl).searchParams.get("host") ?? new URL(databaseUrl).host;
    return `${version} on this machine via ${via} (fsync=${fsync}, synchronous_commit=${commit}, shared_buffers=${buffers})`;
  } finally {
    await client.end();
  }
}

/** "met" or "not met", as a report writes it beside a target. */
export function verdict(met: boolean): string {
  return met ? "met" : "**not met**";
}

/** Where bench:seed writes its merchants' keys and the benchmarks that call a seeded database read them. */
export const seedKeysFile = process.env.SEED_KEYS_FILE ?? "bench/seed-keys.json";

/** A merchant of the seed, as bench:seed writes it to `seedKeysFile`. */
export interface SeedMerchant {
  readonly merchant_id: string;
  readonly profile_id: string;
  readonly api_key: string;
  readonly payments: number;
}

/** The seed's merchant with the most payments (the keys file lists them largest first). */
export function largestSeedMerchant(): SeedMerchant {
  const [merchant] = JSON.parse(readFileSync(seedKeysFile, "utf8")) as SeedMerchant[];
  if (merchant === undefined) throw new Error(`${seedKeysFile} lists no merchant: run npm run bench:seed first`);
  return merchant;
}
