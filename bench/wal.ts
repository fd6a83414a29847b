/*
 * `npm run bench:wal`: what one operation of each main write path costs the database, counted rather
 * than timed: WAL bytes (and full-page images), rows inserted, updated and deleted per table,
 * statements (each a round trip), transactions committed, and the CPU time of PostgreSQL and of the
 * service. docs/scaling.md starts from these figures to estimate where one PostgreSQL primary runs
 * out. It prints the tables that document shows; nothing is written.
 *
 * It starts a PostgreSQL cluster of its own (test/support/postgres-cluster.ts) with
 * pg_stat_statements preloaded, so nothing else on the shared server on 5432 moves the counters,
 * and the service on it as the other benchmarks do (bench/service.ts). For each flow and each
 * concurrency it creates a merchant, checkpoints, warms up, snapshots the counters, runs WAL_COUNT
 * operations, waits until their background work is done (jobs, webhook deliveries, the merges of
 * list_counts and balance_totals: they are part of what an operation costs), snapshots again, and
 * divides the difference by the operations. The WAL between the two snapshots is read back with
 * pg_waldump, so every byte is attributed to the table (or catalog) it went to and every row is
 * counted exactly, beside what pg_stat_user_tables says.
 *
 * Flows (WAL_FLOWS, comma-separated, all by default): `payment` (create with confirm, the 4242
 * card, automatic capture, no webhook_url), `payment+webhook` (the same for a profile whose events
 * go to a local receiver), `refund` (a partial refund of a paid payment, processed by its job) and
 * `payout` (a bank payout, confirmed, sent by its job). WAL_CONCURRENCY ("1,32") is how many
 * operations are in flight at once: 1 shows the unbatched cost, 32 what batching across concurrent
 * calls makes of it. WAL_COUNT (2000) operations per window after WAL_WARMUP (300).
 *
 * Background work runs whether or not anyone pays: the API key cache's heartbeat (5 a second), the
 * webhook dispatcher's look for due deliveries (10 a second), the job runner's poll and recovery
 * (1 a second each), the merges (every 2 s). It is measured alone first, for IDLE_SECONDS (20), and
 * each window's statements, commits and CPU are also given net of it, statement by statement, in
 * proportion to the window's length (the settling included), so that what is left is what the
 * operations caused, in their requests or in the background work they made.
 */
import { execFile, execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import os from "node:os";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import pg from "pg";
import { Pool } from "undici";
import { startPostgresCluster } from "../test/support/postgres-cluster.js";
import { rest } from "./flows.js";
import { type BenchMerchant, newMerchant, prepareDatabase, startServer, stopServer } from "./service.js";
import { startReceiver } from "./webhooks.js";

const run = promisify(execFile);

const count = Number(process.env.WAL_COUNT ?? 2000);
const warmup = Number(process.env.WAL_WARMUP ?? 300);
const idleSeconds = Number(process.env.IDLE_SECONDS ?? 20);
const concurrencies = (process.env.WAL_CONCURRENCY ?? "1,32").split(",").map(Number);
const flowNames = ["payment", "payment+webhook", "refund", "payout"] as const;
type FlowName = (typeof flowNames)[number];
const flows = (process.env.WAL_FLOWS ?? flowNames.join(",")).split(",") as FlowName[];
for (const flow of flows) if (!flowNames.includes(flow)) throw new Error(`WAL_FLOWS: unknown flow ${flow} (${flowNames.join(", ")})`);

const pgBin = "/usr/lib/postgresql/15/bin";
const statementsControl = "/usr/share/postgresql/15/extension/pg_stat_statements.control";
/** The role the measuring connection uses: its own statements are left out of the counts by it. */
const meterRole = "wal_meter";

/** The counters read at one moment. */
interface Snapshot {
  readonly at: number;
  readonly lsn: string;
  readonly walRecords: number;
  readonly walFpi: number;
  readonly walBytes: number;
  readonly commits: number;
  /** CPU seconds (user and system) PostgreSQL's processes and the service's have used so far. */
  readonly postgresCpu: number;
  readonly serviceCpu: number;
  /** Per user table: rows inserted, updated (HOT or not), deleted, and autovacuum's runs. */
  readonly tables: Map<string, { ins: number; upd: number; del: number; vacuums: number }>;
}

/** WAL between two LSNs, read back with pg_waldump and attributed to what each record changed. */
interface WalBreakdown {
  /** Bytes per table (its heap, indexes and TOAST), or per catalog / resource manager for the rest. */
  readonly bytes: Map<string, { heap: number; index: number; fpi: number; fpiCount: number }>;
  /** Heap rows per table as the WAL records them. */
  readonly rows: Map<string, { ins: number; upd: number; del: number }>;
  /** Records per table by kind (`Heap INSERT`, `Btree INSERT_LEAF`, `Heap LOCK`, …). */
  readonly kinds: Map<string, Map<string, number>>;
  readonly commitRecords: number;
}

/** Statements by their query id: how many calls each. */
type Statements = Map<string, number>;

/** What the service does with nobody calling it, over `seconds`: the background every window also holds. */
interface Idle {
  readonly seconds: number;
  readonly walBytes: number;
  readonly statements: Statements;
  readonly commits: number;
  readonly commitRecords: number;
  readonly postgresCpu: number;
  readonly serviceCpu: number;
}

/** What one window measured, in totals over its operations. */
interface Window {
  readonly flow: FlowName;
  readonly concurrency: number;
  readonly operations: number;
  /** How long the operations took, and the whole window from snapshot to snapshot (the settling included). */
  readonly seconds: number;
  readonly spanSeconds: number;
  readonly errors: number;
  readonly wal: { bytes: number; records: number; fpi: number };
  readonly statements: Statements;
  readonly commits: number;
  readonly postgresCpu: number;
  readonly serviceCpu: number;
  readonly tables: Map<string, { ins: number; upd: number; del: number }>;
  readonly autovacuums: number;
  readonly breakdown: WalBreakdown;
}

async function main(): Promise<void> {
  if (!existsSync(statementsControl)) {
    throw new Error(`${statementsControl} is missing: install PostgreSQL 15's contrib (Debian's postgresql-15 ships it)`);
  }
  const cluster = await startPostgresCluster();
  let child: Awaited<ReturnType<typeof startServer>>["child"] | undefined;
  // A run stopped by Ctrl-C or a timeout still ends its service; the cluster helper removes the cluster on exit.
  process.once("exit", () => child?.kill("SIGKILL"));
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => process.exit(1));
  const receiver = flows.includes("payment+webhook") ? await startReceiver() : undefined;
  let meter: pg.Client | undefined;
  try {
    // The cluster helper has no option for extra settings: ALTER SYSTEM adds them to the
    // postgresql.auto.conf it wrote, and a restart loads the library.
    const admin = new pg.Client({ connectionString: cluster.url() });
    await admin.connect();
    await admin.query("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'");
    // No timed checkpoint inside a window: each window starts after one of its own (below), so its
    // full-page images are those of pages first touched since, the same for every window.
    await admin.query("ALTER SYSTEM SET checkpoint_timeout = '1h'");
    await admin.query("ALTER SYSTEM SET max_wal_size = '8GB'");
    await admin.query(`CREATE ROLE ${meterRole} LOGIN SUPERUSER`);
    await admin.end();
    await cluster.restart("fast");

    const databaseUrl = cluster.url("payments_wal");
    await prepareDatabase(databaseUrl, true);
    const meterUrl = Object.assign(new URL(databaseUrl), { username: meterRole }).toString();
    meter = new pg.Client({ connectionString: meterUrl });
    await meter.connect();
    await meter.query("CREATE EXTENSION pg_stat_statements");
    // Top-level statements only (the default): those are the service's round trips, not what its triggers run inside them.
    const track = (await meter.query<{ track: string }>("SELECT current_setting('pg_stat_statements.track') AS track")).rows[0]!.track;
    if (track !== "top") throw new Error(`pg_stat_statements.track is ${track}, not top`);
    const server = await startServer(databaseUrl, "1");
    child = server.child;
    processes.service = server.child.pid!;
    const { dataDir, version } = (
      await meter.query<{ dataDir: string; version: string }>(
        `SELECT current_setting('data_directory') AS "dataDir", split_part(version(), ' on ', 1) AS version`,
      )
    ).rows[0]!;
    processes.postmaster = Number(readFileSync(`${dataDir}/postmaster.pid`, "utf8").split("\n")[0]);

    // What autovacuum would otherwise do in the middle of a window, once: the catalogs the
    // migrations changed, and template1's and postgres's, which a new cluster has never analyzed.
    await meter.query("VACUUM ANALYZE");
    for (const database of ["template1", "postgres"]) {
      const other = new pg.Client({ connectionString: Object.assign(new URL(meterUrl), { pathname: `/${database}` }).toString() });
      await other.connect();
      await other.query("VACUUM ANALYZE");
      await other.end();
    }
    // Background work alone: what the service writes per second while nobody calls it, once its
    // start-up's statistics are flushed (see `settled`).
    await sleep(11_000);
    const idleBefore = await snapshot(meter);
    await meter.query("SELECT pg_stat_statements_reset()");
    await sleep(idleSeconds * 1000);
    const idleAfter = await snapshot(meter);
    const idleStatements = await statementCalls(meter);
    const idleBreakdown = await walBreakdown(meter, dataDir, idleBefore.lsn, idleAfter.lsn);
    const idle: Idle = {
      seconds: (idleAfter.at - idleBefore.at) / 1000,
      walBytes: idleAfter.walBytes - idleBefore.walBytes,
      statements: idleStatements,
      commits: idleAfter.commits - idleBefore.commits,
      commitRecords: idleBreakdown.commitRecords,
      postgresCpu: idleAfter.postgresCpu - idleBefore.postgresCpu,
      serviceCpu: idleAfter.serviceCpu - idleBefore.serviceCpu,
    };
    console.error(`idle: ${sum(idleStatements)} statements in ${idle.seconds} s`);

    const windows: Window[] = [];
    for (const flow of flows) {
      for (const concurrency of concurrencies) {
        const window = await measure(server.url, server.adminKey, meter, dataDir, flow, concurrency, receiver?.url);
        windows.push(window);
        console.error(JSON.stringify({ flow, concurrency, seconds: window.seconds, errors: window.errors, ...perOperation(window, idle) }));
      }
    }
    const { rows: indexes } = await meter.query<{ table: string; n: number }>(
      "SELECT c.relname AS table, count(*)::int AS n FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = 'public' GROUP BY 1",
    );
    console.log(report(windows, idle, version, new Map(indexes.map((r) => [r.table, r.n]))));
    // The summary again, for a log that is read from its end.
    console.error(summary(windows, idle));
  } finally {
    await stopServer(child);
    await receiver?.close();
    // Before the cluster goes, or its connection's end is an error nobody handles.
    await meter?.end();
    cluster.destroy();
  }
}

/** One flow at one concurrency: a merchant of its own, warm-up, then the measured window. */
async function measure(
  url: string,
  adminKey: string,
  meter: pg.Client,
  dataDir: string,
  flow: FlowName,
  concurrency: number,
  receiverUrl: string | undefined,
): Promise<Window> {
  const merchant = await newMerchant(url, adminKey, flow === "payment+webhook" ? receiverUrl : undefined);
  const pool = new Pool(url, { connections: concurrency, keepAliveTimeout: 60_000, keepAliveMaxTimeout: 60_000 });
  try {
    // A refund needs a paid payment of its own: they are made before the window (and before its checkpoint).
    const paid: string[] = [];
    if (flow === "refund") {
      await drive(32, warmup + count, async () => {
        const body = await call(pool, merchant, "/payments", rest.create(merchant.profileId, { confirm: true }));
        paid.push(body.payment_id as string);
      });
    }
    const operation = operationOf(flow, pool, merchant, paid);
    await meter.query("CHECKPOINT");
    await drive(concurrency, warmup, operation);
    await settled(meter, merchant.merchantId);
    const before = await snapshot(meter);
    await meter.query("SELECT pg_stat_statements_reset()");
    console.error(`${flow}, ${concurrency} in flight: ${count} operations`);
    const started = performance.now();
    const errors = await drive(concurrency, count, operation);
    const seconds = (performance.now() - started) / 1000;
    await settled(meter, merchant.merchantId);
    const after = await snapshot(meter);
    const statements = await statementCalls(meter);
    const breakdown = await walBreakdown(meter, dataDir, before.lsn, after.lsn);
    const tables = new Map<string, { ins: number; upd: number; del: number }>();
    let autovacuums = 0;
    for (const [table, a] of after.tables) {
      const b = before.tables.get(table) ?? { ins: 0, upd: 0, del: 0, vacuums: 0 };
      const d = { ins: a.ins - b.ins, upd: a.upd - b.upd, del: a.del - b.del };
      autovacuums += a.vacuums - b.vacuums;
      if (d.ins + d.upd + d.del > 0) tables.set(table, d);
    }
    return {
      flow,
      concurrency,
      operations: count,
      seconds,
      spanSeconds: (after.at - before.at) / 1000,
      errors,
      wal: { bytes: after.walBytes - before.walBytes, records: after.walRecords - before.walRecords, fpi: after.walFpi - before.walFpi },
      statements,
      commits: after.commits - before.commits,
      postgresCpu: after.postgresCpu - before.postgresCpu,
      serviceCpu: after.serviceCpu - before.serviceCpu,
      tables,
      autovacuums,
      breakdown,
    };
  } finally {
    await pool.close();
  }
}

/** The call one operation of `flow` makes; a refund takes the next of the payments made for it. */
function operationOf(flow: FlowName, pool: Pool, merchant: BenchMerchant, paid: string[]): () => Promise<void> {
  switch (flow) {
    case "payment":
    case "payment+webhook":
      return async () => {
        const body = await call(pool, merchant, "/payments", rest.create(merchant.profileId, { confirm: true }));
        if (body.status !== "succeeded") throw new Error(`payment ${String(body.status)}`);
      };
    case "refund":
      return async () => {
        await call(pool, merchant, "/refunds", rest.refund(paid.pop()!));
      };
    case "payout":
      return async () => {
        await call(pool, merchant, "/payouts/create", {
          amount: 500,
          currency: "USD",
          profile_id: merchant.profileId,
          payout_type: "bank",
          payout_method_data: {
            bank: { bank_account_number: "000123456789", bank_routing_number: "110000000", bank_account_holder_name: "Ada Lovelace" },
          },
        });
      };
  }
}

/** POSTs `body` to `path` as the merchant; the answer's body, or a thrown error naming the status. */
async function call(pool: Pool, merchant: BenchMerchant, path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await pool.request({
    method: "POST",
    path,
    headers: { "content-type": "application/json", "api-key": merchant.apiKey },
    body: JSON.stringify(body),
  });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`${path}: ${res.statusCode} ${text.slice(0, 300)}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** Runs `total` operations, `concurrency` at a time (a closed loop); the number that failed. */
async function drive(concurrency: number, total: number, operation: () => Promise<void>): Promise<number> {
  let started = 0;
  let errors = 0;
  const loop = async () => {
    while (started < total) {
      started++;
      try {
        await operation();
      } catch (error) {
        if (errors++ < 3) console.error(String(error));
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  return errors;
}

/**
 * Waits until what the window's calls set in motion is done: no job due, no refund, payout or
 * webhook delivery of the merchant pending, and the merchant's list counts and running totals
 * merged (one row per key), since the merges are part of what each payment costs. Then waits for
 * the statistics of every backend to be flushed: a backend that flushed less than a second ago
 * holds the rest back for up to 10 s while idle (PostgreSQL 15's PGSTAT_IDLE_INTERVAL), so 11 s.
 * The background work of those seconds falls into the window, and is what the idle figures tell
 * apart.
 */
async function settled(meter: pg.Client, merchantId: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const { rows } = await meter.query<{ busy: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM jobs WHERE status = 'pending' AND run_at <= now() + interval '5 seconds')
           OR EXISTS (SELECT 1 FROM refunds WHERE merchant_id = $1 AND status = 'pending')
           OR EXISTS (SELECT 1 FROM payouts WHERE merchant_id = $1 AND status = 'pending')
           OR EXISTS (SELECT 1 FROM webhook_deliveries WHERE merchant_id = $1 AND status = 'pending')
           OR EXISTS (SELECT 1 FROM list_counts WHERE merchant_id = $1 AND NOT merged)
           OR EXISTS (SELECT 1 FROM balance_totals WHERE merchant_id = $1 AND NOT merged) AS busy`,
      [merchantId],
    );
    if (!rows[0]!.busy) break;
    if (Date.now() > deadline) throw new Error("the background work of the window did not finish within 2 minutes");
    await sleep(250);
  }
  // A fixed while rather than until the counters stand still, as scaling.md's figures were measured: until
  // migration 1766400000000 the ledger's merge wrote balance_folds' mark every 2 s, so they never did.
  await sleep(11_000);
}

/** The postmaster of the cluster and the service's first process, whose trees' CPU a snapshot reads. */
const processes = { postmaster: 0, service: 0 };
const ticksPerSecond = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());

/**
 * CPU seconds, user and system, used by process `root` and every process under it, from /proc.
 * Processes that ended are counted in `root`'s cutime and cstime once it has reaped them (the
 * postmaster reaps every backend and autovacuum worker), so a process ending between two
 * snapshots is counted either way; only one whose parent is not `root` itself would be lost.
 */
function cpuSeconds(root: number): number {
  const parents = new Map<number, number>();
  const times = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The command may hold spaces and parentheses: the fields after its closing one are fixed.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      parents.set(Number(entry), Number(fields[1]));
      // utime, stime, cutime, cstime: fields 14 to 17 of proc(5), from the state (field 3) on here.
      times.set(Number(entry), fields.slice(11, 15).map(Number));
    } catch {
      // Ended while listed.
    }
  }
  const tree = [root];
  for (let i = 0; i < tree.length; i++) for (const [child, parent] of parents) if (parent === tree[i]) tree.push(child);
  let ticks = 0;
  for (const pid of tree) {
    const [utime = 0, stime = 0, cutime = 0, cstime = 0] = times.get(pid) ?? [];
    ticks += utime + stime + (pid === root ? cutime + cstime : 0);
  }
  return ticks / ticksPerSecond;
}

async function snapshot(meter: pg.Client): Promise<Snapshot> {
  const at = Date.now();
  const postgresCpu = cpuSeconds(processes.postmaster);
  const serviceCpu = cpuSeconds(processes.service);
  const head = (
    await meter.query<{ lsn: string; records: string; fpi: string; bytes: string; commits: string }>(
      `SELECT pg_current_wal_lsn()::text AS lsn, w.wal_records AS records, w.wal_fpi AS fpi, w.wal_bytes::text AS bytes,
              d.xact_commit AS commits
         FROM pg_stat_wal w, pg_stat_database d WHERE d.datname = current_database()`,
    )
  ).rows[0]!;
  const tables = new Map<string, { ins: number; upd: number; del: number; vacuums: number }>();
  const { rows } = await meter.query<{ relname: string; ins: string; upd: string; del: string; vacuums: string }>(
    `SELECT relname, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_del AS del, autovacuum_count AS vacuums
       FROM pg_stat_user_tables`,
  );
  for (const r of rows) {
    tables.set(r.relname, { ins: +r.ins, upd: +r.upd, del: +r.del, vacuums: +r.vacuums });
  }
  return {
    at,
    postgresCpu,
    serviceCpu,
    lsn: head.lsn,
    walRecords: +head.records,
    walFpi: +head.fpi,
    walBytes: +head.bytes,
    commits: +head.commits,
    tables,
  };
}

/** Statements the service ran since the last reset (the meter's own left out), by their query id. */
async function statementCalls(meter: pg.Client): Promise<Statements> {
  const { rows } = await meter.query<{ id: string; calls: string; query: string }>(
    `SELECT s.queryid::text AS id, s.calls, s.query FROM pg_stat_statements s
      WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND s.userid <> (SELECT oid FROM pg_roles WHERE rolname = $1)`,
    [meterRole],
  );
  const calls: Statements = new Map();
  for (const r of rows) {
    calls.set(r.id, (calls.get(r.id) ?? 0) + +r.calls);
    labels.set(r.id, labelOf(r.query));
  }
  return calls;
}

/** What each statement (by query id) is called in the report. */
const labels = new Map<string, string>();

/**
 * A statement as the report names it: its start, and the tables it writes in the order it names
 * them, since the service's one statement per change writes many (the object, its event, ledger,
 * key's answer) and starts the same way for every resource.
 */
function labelOf(query: string): string {
  const text = query.replace(/\s+/g, " ");
  const writes = [...text.matchAll(/(?<!FOR |KEY )\b(INSERT INTO|UPDATE|DELETE FROM) "?(\w+)"?/gi)].map(
    (m) => `${m[1]!.split(" ")[0]!.toLowerCase()} ${m[2]}`,
  );
  const unique = [...new Set(writes)];
  return unique.length === 0 ? text.slice(0, 90) : `${text.slice(0, 50)} … writes: ${unique.join(", ")}`;
}

function sum(statements: Statements): number {
  return [...statements.values()].reduce((n, c) => n + c, 0);
}

/**
 * The WAL from `from` to `to`, record by record (pg_waldump, as the postgres OS user, which owns
 * the files): each record's bytes go to the relation of its first block (a table with its indexes
 * and TOAST, named by the table), or to its resource manager when it has none (commits, the
 * standby's snapshots); heap inserts, updates and deletes of user tables are counted as rows.
 */
async function walBreakdown(meter: pg.Client, dataDir: string, from: string, to: string): Promise<WalBreakdown> {
  const names = new Map<string, { table: string; index: boolean }>();
  const { rows } = await meter.query<{ node: string; db: string; table: string; index: boolean }>(
    `SELECT pg_relation_filenode(c.oid)::text AS node,
            CASE WHEN c.relisshared THEN '0' ELSE (SELECT oid FROM pg_database WHERE datname = current_database())::text END AS db,
            coalesce(owner.relname, c.relname) AS table,
            c.relkind = 'i' AS index
       FROM pg_class c
       LEFT JOIN pg_index i ON i.indexrelid = c.oid
       LEFT JOIN pg_class toast_of ON toast_of.reltoastrelid = coalesce(i.indrelid, c.oid)
       LEFT JOIN pg_class owner ON owner.oid = coalesce(toast_of.oid, i.indrelid)
      WHERE pg_relation_filenode(c.oid) IS NOT NULL`,
  );
  const ourDb = rows.find((r) => r.db !== "0")?.db;
  for (const r of rows) names.set(`${r.db}/${r.node}`, { table: r.table, index: r.index });
  // The WAL writer writes what was inserted within wal_writer_delay (200 ms): wait for the last records to be on disk.
  await sleep(1000);
  const { stdout } = await run(
    "runuser",
    ["-u", "postgres", "--", `${pgBin}/pg_waldump`, "-p", `${dataDir}/pg_wal`, "-s", from, "-e", to],
    { maxBuffer: 1 << 30 },
  );
  const bytes = new Map<string, { heap: number; index: number; fpi: number; fpiCount: number }>();
  const tableRows = new Map<string, { ins: number; upd: number; del: number }>();
  const kinds = new Map<string, Map<string, number>>();
  let commitRecords = 0;
  const line = /^rmgr: (\S+)\s+len \(rec\/tot\):\s+(\d+)\/\s*(\d+),.*?desc: (\S+)(.*)$/;
  for (const text of stdout.split("\n")) {
    const m = line.exec(text);
    if (m === null) continue;
    const [, rmgr, rec, tot, op, rest] = m as unknown as [string, string, string, string, string, string];
    const block = / rel \d+\/(\d+)\/(\d+)/.exec(rest);
    let key = `(${rmgr})`;
    let relation: { table: string; index: boolean } | undefined;
    if (block !== null) {
      relation = names.get(`${block[1]}/${block[2]}`);
      // Another database's catalogs (autovacuum in template1, say): named as ours, marked apart.
      const elsewhere = relation === undefined ? names.get(`${ourDb}/${block[2]}`) : undefined;
      key =
        relation?.table ?? (elsewhere === undefined ? `(relation ${block[1]}/${block[2]})` : `${elsewhere.table} (database ${block[1]})`);
    }
    const entry = bytes.get(key) ?? { heap: 0, index: 0, fpi: 0, fpiCount: 0 };
    if (relation?.index) entry.index += +tot;
    else entry.heap += +tot;
    const images = (rest.match(/ FPW/g) ?? []).length;
    if (images > 0) {
      entry.fpi += +tot - +rec;
      entry.fpiCount += images;
    }
    bytes.set(key, entry);
    const kind = `${rmgr} ${op.replace(/\+INIT$/, "")}`;
    const ofTable = kinds.get(key) ?? new Map<string, number>();
    ofTable.set(kind, (ofTable.get(kind) ?? 0) + 1);
    kinds.set(key, ofTable);
    if (rmgr === "Transaction" && op === "COMMIT") commitRecords++;
    if (rmgr === "Heap" && relation !== undefined && !relation.index) {
      const counted = tableRows.get(relation.table) ?? { ins: 0, upd: 0, del: 0 };
      if (op.startsWith("INSERT")) counted.ins++;
      else if (op.startsWith("UPDATE") || op.startsWith("HOT_UPDATE")) counted.upd++;
      else if (op === "DELETE") counted.del++;
      tableRows.set(relation.table, counted);
    }
    if (rmgr === "Heap2" && op.startsWith("MULTI_INSERT") && relation !== undefined) {
      const counted = tableRows.get(relation.table) ?? { ins: 0, upd: 0, del: 0 };
      const tuples = /(\d+) tuples|ntuples: (\d+)/.exec(rest);
      counted.ins += Number(tuples?.[1] ?? tuples?.[2] ?? 0);
      tableRows.set(relation.table, counted);
    }
  }
  for (const [table, counted] of tableRows) if (counted.ins + counted.upd + counted.del === 0) tableRows.delete(table);
  return { bytes, rows: tableRows, kinds, commitRecords };
}

/**
 * Statements of a window less what the idle service runs in as long (its key cache's heartbeats,
 * the webhook dispatcher's looks, the job runner's polls, the merges with nothing to merge), by
 * statement; what is left is what the operations caused, in the request or in background work.
 */
function netOfIdle(w: Window, idle: Idle): Statements {
  const net: Statements = new Map();
  for (const [text, calls] of w.statements) {
    net.set(text, calls - ((idle.statements.get(text) ?? 0) * w.spanSeconds) / idle.seconds);
  }
  return net;
}

/** The window's figures per operation; statements and commits also net of the idle service's. */
function perOperation(w: Window, idle: Idle) {
  const per = (n: number) => Math.round((100 * n) / w.operations) / 100;
  const rows = [...w.tables.values()].reduce((s, t) => ({ ins: s.ins + t.ins, upd: s.upd + t.upd, del: s.del + t.del }), {
    ins: 0,
    upd: 0,
    del: 0,
  });
  const fpiBytes = [...w.breakdown.bytes.values()].reduce((s, b) => s + b.fpi, 0);
  const idleShare = w.spanSeconds / idle.seconds;
  return {
    walBytes: Math.round(w.wal.bytes / w.operations),
    walImageBytes: Math.round(fpiBytes / w.operations),
    walRecords: per(w.wal.records),
    fullPageImages: per(w.wal.fpi),
    rowsInserted: per(rows.ins),
    rowsUpdated: per(rows.upd),
    rowsDeleted: per(rows.del),
    statements: per(sum(w.statements)),
    statementsNet: per(sum(netOfIdle(w, idle))),
    commits: per(w.commits),
    commitsNet: per(w.commits - idle.commits * idleShare),
    walCommits: per(w.breakdown.commitRecords),
    walCommitsNet: per(w.breakdown.commitRecords - idle.commitRecords * idleShare),
    postgresCpuMs: per(1000 * (w.postgresCpu - idle.postgresCpu * idleShare)),
    serviceCpuMs: per(1000 * (w.serviceCpu - idle.serviceCpu * idleShare)),
  };
}

/** The main table: one row per flow and concurrency. */
function summary(windows: readonly Window[], idle: Idle): string {
  const lines = [
    "| Flow | In flight | Ops/s | WAL bytes | of which page images (count) | WAL records | Rows ins / upd / del | Statements, net (gross) | Commits with WAL, net | All commits, net | CPU ms, PostgreSQL / service, net |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const w of windows) {
    const p = perOperation(w, idle);
    lines.push(
      `| ${w.flow} | ${w.concurrency} | ${Math.round(w.operations / w.seconds)} | ${p.walBytes.toLocaleString("en-US")} | ${p.walImageBytes.toLocaleString("en-US")} (${p.fullPageImages}) | ${p.walRecords} | ` +
        `${p.rowsInserted} / ${p.rowsUpdated} / ${p.rowsDeleted} | ${p.statementsNet} (${p.statements}) | ${p.walCommitsNet} | ${p.commitsNet} | ${p.postgresCpuMs} / ${p.serviceCpuMs} |`,
    );
  }
  return lines.join("\n");
}

/** The figures as docs/scaling.md shows them: the main table, then per window what went where. */
function report(windows: readonly Window[], idle: Idle, version: string, indexes: Map<string, number>): string {
  const cpus = os.cpus();
  const per = (w: Window, n: number) => (n / w.operations).toFixed(2);
  const lines = [
    `Measured by \`npm run bench:wal\` on ${new Date().toISOString().slice(0, 10)}: ${cpus.length} × ${cpus[0]?.model.trim() ?? "unknown CPU"}, ` +
      `${Math.round(os.totalmem() / 2 ** 30)} GiB, load average ${os.loadavg()[0]!.toFixed(1)} at the end; ${version}, a cluster of its own ` +
      `(fsync on, synchronous_commit on, full_page_writes on, wal_compression off), the service with one worker; ${count} operations per window after ${warmup} of warm-up.`,
    "",
    `Idle (no calls, ${idle.seconds.toFixed(0)} s): ${(idle.walBytes / idle.seconds).toFixed(0)} WAL bytes/s, ${(sum(idle.statements) / idle.seconds).toFixed(1)} statements/s, ` +
      `${(idle.commits / idle.seconds).toFixed(1)} commits/s (${(idle.commitRecords / idle.seconds).toFixed(1)}/s with a commit record), ` +
      `CPU ${((1000 * idle.postgresCpu) / idle.seconds).toFixed(0)} ms/s PostgreSQL, ${((1000 * idle.serviceCpu) / idle.seconds).toFixed(0)} ms/s service.`,
    "",
    summary(windows, idle),
  ];
  for (const w of windows) {
    lines.push(
      "",
      `${w.flow}, ${w.concurrency} in flight, per operation (${w.seconds.toFixed(1)} s of calls, ${w.spanSeconds.toFixed(1)} s between snapshots, ${w.errors} errors, ${w.autovacuums} autovacuum runs):`,
      "",
      "| Table | WAL bytes (heap / index) | Rows ins / upd / del (stats; WAL) | Records |",
      "|---|---|---|---|",
    );
    const keys = [...w.breakdown.bytes.keys()].sort((a, b) => total(w.breakdown.bytes.get(b)!) - total(w.breakdown.bytes.get(a)!));
    for (const key of keys) {
      const b = w.breakdown.bytes.get(key)!;
      if (b.heap + b.index < w.operations) continue;
      const s = w.tables.get(key);
      const r = w.breakdown.rows.get(key);
      const rows = [
        s === undefined ? "" : `${per(w, s.ins)} / ${per(w, s.upd)} / ${per(w, s.del)}`,
        r === undefined ? "" : `${per(w, r.ins)} / ${per(w, r.upd)} / ${per(w, r.del)}`,
      ].filter((t) => t !== "");
      const kinds = [...(w.breakdown.kinds.get(key) ?? new Map<string, number>())]
        .sort((a, b) => b[1] - a[1])
        .filter(([, n]) => n >= w.operations / 20)
        .slice(0, 6)
        .map(([kind, n]) => `${kind} ${per(w, n)}`)
        .join(", ");
      const images = b.fpiCount === 0 ? "" : `; ${per(w, b.fpi)} in ${per(w, b.fpiCount)} page images`;
      const named = indexes.has(key) ? `${key} (${indexes.get(key)} indexes)` : key;
      lines.push(
        `| ${named} | ${per(w, b.heap + b.index)} (${per(w, b.heap)} / ${per(w, b.index)}${images}) | ${rows.join("; ")} | ${kinds} |`,
      );
    }
    lines.push("", "| Calls per operation, net of idle | Statement |", "|---|---|");
    const net = [...netOfIdle(w, idle)].filter(([, n]) => n / w.operations >= 0.005).sort((a, b) => b[1] - a[1]);
    for (const [id, n] of net) lines.push(`| ${per(w, n)} | \`${(labels.get(id) ?? id).replace(/\|/g, "\\|")}\` |`);
  }
  lines.push("", "Idle, statements per second:", "");
  for (const [id, n] of [...idle.statements].sort((a, b) => b[1] - a[1])) {
    lines.push(`- ${(n / idle.seconds).toFixed(2)}: \`${labels.get(id) ?? id}\``);
  }
  return lines.join("\n");
}

function total(b: { heap: number; index: number }): number {
  return b.heap + b.index;
}

await main();
