/*
 * `npm run bench:soak`: whether one instance stays bounded through a long mixed load (issue 19, the
 * tables that should level off; issue 20, RSS under 300 MB with no growth). Written up by hand in
 * docs/performance.md ("Soak").
 *
 * Starts the service's production build (one worker, as `npm start` runs it) on DATABASE_URL, by default a
 * `soak_bench` database in the local PostgreSQL created afresh, and drives SOAK_CONNECTIONS (50)
 * connections for SOAK_SECONDS (600) through a mix: create-with-confirm, an instant and a scheduled
 * partial refund of it, a manual-capture payment and its partial capture, a retrieve, a list and a
 * payout, every write with its own idempotency key, over four merchants of which two send their
 * events to a local webhook receiver. Every SOAK_SAMPLE_SECONDS (30) it reads the rows of the tables
 * that grow, the instance's RSS, and the requests and errors of the window; at the end it judges
 * each bounded table and the RSS.
 *
 * Retention is days long (idempotency keys 24 h, fixed; EVENT_RETENTION_DAYS at least 30), so a
 * run of minutes would never see a row expire. The service runs with the sandbox test clock, and
 * every SOAK_JUMP_SECONDS (60; a multiple of the sample period) the bench moves it on by
 * EVENT_RETENTION_DAYS + 1 days: every key and event written before the jump is then past its
 * retention, and what the reapers leave shows whether they keep up under the load. A bounded
 * table then holds about a jump interval of rows. SOAK_JUMP_SECONDS=0 runs on real time, where
 * only the growth rates mean something.
 */
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { createServer } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import autocannon from "autocannon";
import pg from "pg";
import { memoryVerdict, newMerchant, prepareDatabase, rssMb, slope, startServer, stopServer } from "./service.js";
import { confirmedPayment } from "./flows.js";
import { startReceiver } from "./webhooks.js";

const seconds = Number(process.env.SOAK_SECONDS ?? 600);
const connections = Number(process.env.SOAK_CONNECTIONS ?? 50);
const sampleSeconds = Number(process.env.SOAK_SAMPLE_SECONDS ?? 30);
const jumpSeconds = Number(process.env.SOAK_JUMP_SECONDS ?? 60);
const retentionDays = Number(process.env.EVENT_RETENTION_DAYS ?? 30);
const scheduledRefundDelaySeconds = 60;
/** How often each instance reaps expired idempotency keys (src/app.ts): the most a key outlives its expiry. */
const keyReapSeconds = 10;
const rssLimitMb = 300;

if (jumpSeconds % sampleSeconds !== 0) throw new Error("SOAK_JUMP_SECONDS must be a multiple of SOAK_SAMPLE_SECONDS");

/** Tables that must stay bounded, and for how long (seconds of the run) a row is kept at most. */
const bounded = {
  idempotency_keys: (jumpSeconds || 86_400) + keyReapSeconds,
  // The event reaper runs once per hour of the (test) clock: at each jump, else hourly.
  events: jumpSeconds || retentionDays * 86_400 + 3600,
  webhook_deliveries: jumpSeconds || retentionDays * 86_400 + 3600,
  // Ended jobs are deleted; the longest-lived wait for the scheduled refunds' settlement run.
  jobs: scheduledRefundDelaySeconds + keyReapSeconds,
} as const;
/** Business records, kept for good: their growth rate is reported, not judged. */
const kept = ["payments", "refunds", "payouts"] as const;
type Table = keyof typeof bounded | (typeof kept)[number];
const tables = [...Object.keys(bounded), ...kept] as Table[];

/** What one sample read. */
interface Sample {
  readonly t: number;
  readonly rows: Record<Table, number>;
  readonly inserted: Record<Table, number>;
  readonly megabytes: Record<Table, number>;
  /** Jobs due by the (test) clock and not yet run: the runner's backlog. */
  readonly due: number;
  readonly rssMb: number;
  /** The V8 heap in use, from the instance's own metrics: what of the RSS is JavaScript objects. */
  readonly heapMb: number;
  readonly requests: number;
  readonly errors: number;
  readonly delivered: number;
  readonly jumped: boolean;
}

/** Rows (count(*), exact), rows ever inserted and on-disk size with indexes of every watched table. */
async function readTables(db: pg.Client) {
  const counts = await db.query<Record<Table, string>>(`SELECT ${tables.map((t) => `(SELECT count(*) FROM ${t}) AS ${t}`).join(", ")}`);
  const stats = await db.query<{ relname: Table; inserted: string; bytes: string }>(
    `SELECT relname, n_tup_ins AS inserted, pg_total_relation_size(relid) AS bytes FROM pg_stat_user_tables WHERE relname = ANY ($1)`,
    [tables],
  );
  const byTable = <T>(value: (table: Table) => T) => Object.fromEntries(tables.map((t) => [t, value(t)])) as Record<Table, T>;
  const stat = (t: Table) => stats.rows.find((r) => r.relname === t)!;
  const due = await db.query<{ due: string }>(
    `SELECT count(*) AS due FROM jobs WHERE run_at <= now() + (SELECT offset_ms FROM sandbox_clock) * interval '1 millisecond'`,
  );
  return {
    due: Number(due.rows[0]!.due),
    rows: byTable((t) => Number(counts.rows[0]![t])),
    inserted: byTable((t) => Number(stat(t).inserted)),
    megabytes: byTable((t) => Number(stat(t).bytes) / 2 ** 20),
  };
}

/** A port nothing listens on now, for the instance's ops listener (its metrics). */
async function freePort(): Promise<number> {
  const server = createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

/** The instance's V8 heap in use, in MB, as its /metrics reports it. */
async function heapMb(opsPort: number): Promise<number> {
  const metrics = await (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text();
  return Number(/^nodejs_heap_size_used_bytes (\S+)/m.exec(metrics)?.[1] ?? Number.NaN) / 2 ** 20;
}

/** The requests and errors of the window under way, over every merchant's load, with the first few errors seen. */
const tally = { requests: 0, errors: 0 };
const errorKinds = new Map<string, number>();

interface Flow {
  paid?: string;
  held?: string;
}

/**
 * One connection's loop through the mix for a merchant. A step whose payment was not created is
 * skipped (autocannon starts the loop again), so one failure is counted once.
 */
function mix(apiKey: string, profileId: string): autocannon.Request[] {
  const headers = () => ({ "content-type": "application/json", "api-key": apiKey, "x-idempotency-key": randomUUID() });
  const step = (
    name: string,
    method: "GET" | "POST",
    path: (flow: Flow) => string | undefined,
    body?: (flow: Flow) => unknown,
    keep?: (flow: Flow, id: string) => void,
  ): autocannon.Request => ({
    method,
    setupRequest: (req, context) => {
      const flow = context as Flow;
      const to = path(flow);
      if (to === undefined) return undefined as unknown as autocannon.Request;
      return { ...req, path: to, headers: headers(), ...(body === undefined ? {} : { body: JSON.stringify(body(flow)) }) };
    },
    onResponse: (status, responseBody, context) => {
      if (status >= 200 && status < 300) {
        keep?.(context as Flow, (JSON.parse(responseBody) as { payment_id: string }).payment_id);
        return;
      }
      const code = /"code":"([^"]+)"/.exec(responseBody)?.[1] ?? responseBody.slice(0, 80);
      const kind = `${name}: ${status} ${code}`;
      errorKinds.set(kind, (errorKinds.get(kind) ?? 0) + 1);
    },
  });
  return [
    step(
      "create, confirm",
      "POST",
      () => "/payments",
      () => confirmedPayment(profileId, 10_000),
      (flow, id) => {
        flow.paid = id;
      },
    ),
    step(
      "instant refund",
      "POST",
      (flow) => flow.paid && "/refunds",
      (flow) => ({ payment_id: flow.paid, amount: 100 }),
    ),
    step(
      "scheduled refund",
      "POST",
      (flow) => flow.paid && "/refunds",
      (flow) => ({ payment_id: flow.paid, amount: 100, refund_type: "scheduled" }),
    ),
    step(
      "create, confirm, manual capture",
      "POST",
      () => "/payments",
      () => confirmedPayment(profileId, 10_000, { capture_method: "manual" }),
      (flow, id) => {
        flow.held = id;
      },
    ),
    step(
      "capture",
      "POST",
      (flow) => flow.held && `/payments/${flow.held}/capture`,
      () => ({ amount_to_capture: 6000 }),
    ),
    step("retrieve", "GET", (flow) => flow.paid && `/payments/${flow.paid}`),
    step("list", "GET", () => "/payments/list?limit=10"),
    step(
      "payout",
      "POST",
      () => "/payouts/create",
      () => ({
        amount: 500,
        currency: "USD",
        profile_id: profileId,
        payout_type: "bank",
        payout_method_data: {
          bank: { bank_account_number: "000123456789", bank_routing_number: "110000000", bank_account_holder_name: "Ada Lovelace" },
        },
      }),
    ),
  ];
}

const number = (n: number) => Math.round(n).toLocaleString("en-US");

function printTable(samples: readonly Sample[]): void {
  const header = [
    "t s",
    "req/s",
    "errors",
    "RSS MB",
    "heap MB",
    ...tables.map((t) => t.replace("idempotency_keys", "keys").replace("webhook_deliveries", "deliveries")),
    "due jobs",
    "delivered/s",
  ];
  console.log(`| ${header.join(" | ")} |\n|${header.map(() => "---|").join("")}`);
  for (const [i, s] of samples.entries()) {
    if (i === 0) continue;
    const span = s.t - samples[i - 1]!.t;
    const cells = [
      `${s.t}${s.jumped ? " ⏩" : ""}`,
      number(s.requests / span),
      number(s.errors),
      s.rssMb.toFixed(0),
      s.heapMb.toFixed(0),
      ...tables.map((t) => number(s.rows[t])),
      number(s.due),
      number((s.delivered - samples[i - 1]!.delivered) / span),
    ];
    console.log(`| ${cells.join(" | ")} |`);
  }
}

/** Per bounded table: its peaks in the first and last third, against its ceiling (fastest insert rate × how long a row is kept). */
function verdicts(samples: readonly Sample[]): string[] {
  const measured = samples.slice(1);
  const firstThird = measured.filter((s) => s.t <= seconds / 3);
  const lastThird = measured.filter((s) => s.t > (2 * seconds) / 3);
  const lines: string[] = [];
  for (const [table, keptSeconds] of Object.entries(bounded) as [keyof typeof bounded, number][]) {
    const peak = (of: readonly Sample[], figure: (s: Sample) => number) => Math.max(...of.map(figure));
    const rows = (s: Sample) => s.rows[table];
    const fastest = Math.max(...measured.map((s, i) => (s.inserted[table] - samples[i]!.inserted[table]) / (s.t - samples[i]!.t)));
    const ceiling = fastest * keptSeconds;
    const [first, last, max] = [peak(firstThird, rows), peak(lastThird, rows), peak(measured, rows)];
    const levelsOff = last <= 1.2 * first || max <= ceiling;
    const size = (of: readonly Sample[]) => peak(of, (s) => s.megabytes[table]).toFixed(1);
    lines.push(
      `${table}: peak ${number(first)} rows in the first third, ${number(last)} in the last (×${(last / Math.max(first, 1)).toFixed(2)}); ` +
        `max ${number(max)} against a ceiling of ${number(ceiling)} (${number(fastest)} rows/s × ${keptSeconds} s); ` +
        `${size(firstThird)} → ${size(lastThird)} MB on disk: ${levelsOff ? "levels off" : "GROWS"}`,
    );
  }
  const span = measured.at(-1)!.t - samples[0]!.t;
  for (const table of kept) {
    const end = measured.at(-1)!;
    lines.push(
      `${table}: kept for good, ${number((end.rows[table] - samples[0]!.rows[table]) / span)} rows/s, ${end.megabytes[table].toFixed(1)} MB at the end`,
    );
  }
  const end = measured.at(-1)!;
  lines.push(
    `due jobs: ${number(measured[0]!.due)} at ${measured[0]!.t} s, ${number(end.due)} at ${end.t} s, trend ${slope(measured.map((s) => ({ x: s.t, y: s.due }))).toFixed(1)} jobs/s`,
  );
  const memory = memoryVerdict(measured, seconds, rssLimitMb);
  const settled = measured.filter((s) => s.t >= memory.settledFrom);
  const heapTrend = 60 * slope(settled.map((s) => ({ x: s.t, y: s.heapMb })));
  lines.push(
    `RSS: max ${memory.maxMb.toFixed(0)} MB (limit ${rssLimitMb}); peak ${memory.earlyPeakMb.toFixed(0)} MB from ${memory.earlyFrom} s to ${memory.earlyTo} s, ` +
      `${memory.latePeakMb.toFixed(0)} MB in the last third (×${(memory.latePeakMb / memory.earlyPeakMb).toFixed(2)}); from ${memory.settledFrom} s trend ` +
      `${memory.trendMbPerMinute.toFixed(1)} MB/min, heap ${heapTrend.toFixed(1)} MB/min: ${memory.bounded ? "bounded, no growth" : "GROWS or over the limit"}`,
  );
  return lines;
}

async function main(): Promise<void> {
  const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@localhost/soak_bench?host=/var/run/postgresql";
  await prepareDatabase(databaseUrl, process.env.DATABASE_URL === undefined);
  const opsPort = await freePort();
  const { url, adminKey, child } = await startServer(databaseUrl, "1", {
    SANDBOX_TEST_CLOCK: String(jumpSeconds > 0),
    EVENT_RETENTION_DAYS: String(retentionDays),
    SCHEDULED_REFUND_DELAY_SECONDS: String(scheduledRefundDelaySeconds),
    OPS_PORT: String(opsPort),
  });
  const receiver = await startReceiver();
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    const merchants = [
      await newMerchant(url, adminKey, receiver.url),
      await newMerchant(url, adminKey, receiver.url),
      await newMerchant(url, adminKey),
      await newMerchant(url, adminKey),
    ];
    const startedAt = Date.now();
    const take = async (jumped: boolean): Promise<Sample> => {
      const sample = {
        t: Math.round((Date.now() - startedAt) / 1000),
        ...(await readTables(db)),
        rssMb: rssMb(child.pid!),
        heapMb: await heapMb(opsPort),
        ...tally,
        delivered: (await receiver.received()).seen,
        jumped,
      };
      tally.requests = 0;
      tally.errors = 0;
      return sample;
    };
    const samples = [await take(false)];
    const loads = merchants.map(
      (merchant, i) =>
        new Promise<autocannon.Result>((resolve, reject) => {
          const options = {
            url,
            connections: Math.floor(connections / merchants.length) + (i < connections % merchants.length ? 1 : 0),
            duration: seconds,
            requests: mix(merchant.apiKey, merchant.profileId),
          };
          autocannon(options, (error, result) => (error ? reject(error) : resolve(result)))
            .on("response", (_client, status) => {
              tally.requests++;
              if (status < 200 || status >= 300) tally.errors++;
            })
            .on("reqError", () => {
              tally.requests++;
              tally.errors++;
            });
        }),
    );
    for (let tick = 1; tick * sampleSeconds <= seconds; tick++) {
      await sleep(startedAt + tick * sampleSeconds * 1000 - Date.now());
      const jump = jumpSeconds > 0 && (tick * sampleSeconds) % jumpSeconds === 0 && tick * sampleSeconds < seconds;
      const sample = await take(jump);
      samples.push(sample);
      console.log(
        JSON.stringify({
          t: sample.t,
          requests: sample.requests,
          errors: sample.errors,
          rss_mb: Math.round(sample.rssMb),
          heap_mb: Math.round(sample.heapMb),
          due: sample.due,
          ...sample.rows,
        }),
      );
      if (jump) {
        const res = await fetch(`${url}/sandbox/clock/advance`, {
          method: "POST",
          headers: { "content-type": "application/json", "admin-api-key": adminKey },
          body: JSON.stringify({ seconds: (retentionDays + 1) * 86_400 }),
        });
        if (!res.ok) throw new Error(`advancing the test clock: ${res.status} ${await res.text()}`);
      }
    }
    await Promise.all(loads);
    const received = await receiver.received();
    console.log(
      `\nSoak: ${seconds} s, ${connections} connections, one worker; test clock ${jumpSeconds > 0 ? `moved ${retentionDays + 1} days every ${jumpSeconds} s (⏩)` : "off"}\n`,
    );
    printTable(samples);
    console.log(`\n${verdicts(samples).join("\n")}`);
    // Delivery delays are left out: events carry the test clock's time.
    console.log(`webhooks: ${number(received.seen)} events received (${received.duplicates} twice)`);
    console.log(`errors by step: ${JSON.stringify(Object.fromEntries(errorKinds))}`);
  } finally {
    await db.end();
    await receiver.close();
    await stopServer(child);
  }
}

await main();
