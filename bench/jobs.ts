/*
 * `npx tsx bench/jobs.ts`: how many jobs the job runner settles per second while the service serves
 * the payments load, and whether the backlog of due jobs stays flat. Written up by hand in
 * docs/performance.md ("Job runner throughput").
 *
 * Instant refunds are created at a steady rate (BENCH_REFUNDS_PER_SECOND, 200) while autocannon
 * creates and confirms payments over REST with BENCH_CONNECTIONS (50; 0 for no payments load), for
 * BENCH_WARMUP_SECONDS (10, not measured: JIT, pools, the first growth of fresh tables) and then
 * BENCH_SECONDS (45). Every BENCH_SAMPLE_SECONDS (5) of those the due backlog (`SELECT count(*) FROM jobs
 * WHERE run_at <= now()`) and the refunds settled so far are read from the database. Once the load
 * stops, the runner gets BENCH_DRAIN_SECONDS (15) to work off what is left.
 *
 * BENCH_URL + BENCH_ADMIN_KEY + DATABASE_URL point it at a service already running and its
 * database; without BENCH_URL it starts the service of the working directory as bench/payments.ts
 * does, on a `jobs_bench` database created afresh. To measure another checkout (the code before a
 * change), run it from there: `cd ../main && npx tsx ../runner/bench/jobs.ts`.
 */
import os from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import autocannon from "autocannon";
import pg from "pg";
import { benchTarget, newMerchant, slope, stopServer } from "./service.js";
import { confirmedPayment } from "./flows.js";

const refundsPerSecond = Number(process.env.BENCH_REFUNDS_PER_SECOND ?? 200);
const seconds = Number(process.env.BENCH_SECONDS ?? 45);
const warmupSeconds = Number(process.env.BENCH_WARMUP_SECONDS ?? 10);
const sampleSeconds = Number(process.env.BENCH_SAMPLE_SECONDS ?? 5);
const drainSeconds = Number(process.env.BENCH_DRAIN_SECONDS ?? 15);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 50);
const workers = process.env.WORKERS ?? String(Math.max(1, os.cpus().length - 1));
/** Payments the refunds are spread over, so that refunds of one payment, which lock it, seldom meet. */
const paymentCount = 500;
/** More refund calls than this unanswered means the API, not the runner, is what cannot keep up: the rest are not sent. */
const maxOutstanding = 2_000;

/** What the database says at one moment: jobs due and not yet claimed, refunds no longer pending. */
interface Sample {
  readonly atMs: number;
  readonly due: number;
  readonly settled: number;
}

async function sample(db: pg.Client, startedAt: number): Promise<Sample> {
  const { rows } = await db.query<{ due: number; settled: number }>(
    `SELECT (SELECT count(*)::int FROM jobs WHERE run_at <= now()) AS due,
            (SELECT count(*)::int FROM refunds WHERE status <> 'pending') AS settled`,
  );
  return { atMs: Date.now() - startedAt, ...rows[0]! };
}

/** Slope of the backlog over the samples, in jobs per second: about 0 when it stays flat. */
function backlogSlope(samples: readonly Sample[]): number {
  return slope(samples.map((s) => ({ x: s.atMs / 1000, y: s.due })));
}

/** Paid payments to refund, large enough that the refunds of a run never use one up. */
async function paidPayments(url: string, apiKey: string, profileId: string): Promise<string[]> {
  const ids: string[] = [];
  while (ids.length < paymentCount) {
    const batch = await Promise.all(
      Array.from({ length: 50 }, async () => {
        const res = await fetch(`${url}/payments`, {
          method: "POST",
          headers: { "content-type": "application/json", "api-key": apiKey },
          body: JSON.stringify(confirmedPayment(profileId, 100_000_000)),
        });
        if (!res.ok) throw new Error(`creating a payment: ${res.status} ${await res.text()}`);
        return ((await res.json()) as { payment_id: string }).payment_id;
      }),
    );
    ids.push(...batch);
  }
  return ids;
}

/** Sends instant refunds of 1 at `refundsPerSecond`, spread over each second in tenths, until `until`. */
async function refundSteadily(url: string, apiKey: string, paymentIds: readonly string[], until: number) {
  const counts = { sent: 0, failed: 0, notSent: 0 };
  const outstanding = new Set<Promise<void>>();
  const perTick = refundsPerSecond / 10;
  let owed = 0;
  while (Date.now() < until) {
    owed += perTick;
    for (; owed >= 1; owed--) {
      if (outstanding.size >= maxOutstanding) {
        counts.notSent++;
        continue;
      }
      const paymentId = paymentIds[counts.sent % paymentIds.length]!;
      counts.sent++;
      const call = fetch(`${url}/refunds`, {
        method: "POST",
        headers: { "content-type": "application/json", "api-key": apiKey },
        body: JSON.stringify({ payment_id: paymentId, amount: 1 }),
      })
        .then(async (res) => {
          await res.arrayBuffer();
          if (!res.ok) counts.failed++;
        })
        .catch(() => {
          counts.failed++;
        })
        .finally(() => outstanding.delete(call));
      outstanding.add(call);
    }
    await sleep(100);
  }
  await Promise.all(outstanding);
  return counts;
}

async function main(): Promise<void> {
  const { url, adminKey, databaseUrl, child } = await benchTarget("jobs_bench", workers);
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    const { apiKey, profileId } = await newMerchant(url, adminKey);
    const paymentIds = await paidPayments(url, apiKey, profileId);

    const loadStartedAt = Date.now();
    const loadMs = (warmupSeconds + seconds) * 1000;
    const payments =
      connections === 0
        ? undefined
        : autocannon({
            url,
            connections,
            duration: warmupSeconds + seconds,
            requests: [
              {
                method: "POST",
                path: "/payments",
                headers: { "content-type": "application/json", "api-key": apiKey },
                body: JSON.stringify(confirmedPayment(profileId)),
              },
            ],
          });
    const refunds = refundSteadily(url, apiKey, paymentIds, loadStartedAt + loadMs);
    await sleep(warmupSeconds * 1000);
    const startedAt = Date.now();
    const samples: Sample[] = [await sample(db, startedAt)];
    while (Date.now() - startedAt < seconds * 1000) {
      await sleep(sampleSeconds * 1000 - ((Date.now() - startedAt) % (sampleSeconds * 1000)));
      const taken = await sample(db, startedAt);
      const previous = samples.at(-1)!;
      samples.push(taken);
      console.log(
        JSON.stringify({
          t: Math.round(taken.atMs / 1000),
          due_backlog: taken.due,
          settled_per_s: Math.round(((taken.settled - previous.settled) * 1000) / (taken.atMs - previous.atMs)),
        }),
      );
    }
    const sent = await refunds;
    const paid = await payments;
    const loaded = await sample(db, startedAt);

    // No more load: how fast the runner works off what is left, up to BENCH_DRAIN_SECONDS.
    let drained = loaded;
    while (drained.due > 0 && drained.atMs - loaded.atMs < drainSeconds * 1000) {
      await sleep(1000);
      drained = await sample(db, startedAt);
    }
    const first = samples[0]!;
    const measured = samples.at(-1)!;
    console.log(
      JSON.stringify(
        {
          refunds_offered_per_s: refundsPerSecond,
          refunds_created_per_s: Math.round((sent.sent - sent.failed) / (warmupSeconds + seconds)),
          refund_calls_failed: sent.failed,
          refund_calls_not_sent: sent.notSent,
          payments_per_s: paid === undefined ? 0 : Math.round(paid.requests.total / (warmupSeconds + seconds)),
          payments_p99_ms: paid?.latency.p99,
          payment_errors: paid === undefined ? 0 : paid.errors + paid.non2xx,
          jobs_settled_per_s_under_load: Math.round(((measured.settled - first.settled) * 1000) / (measured.atMs - first.atMs)),
          due_backlog_samples: samples.map((s) => s.due),
          backlog_growth_per_s: Math.round(backlogSlope(samples)),
          backlog_after_load: loaded.due,
          drain_per_s:
            drained.atMs === loaded.atMs ? null : Math.round(((drained.settled - loaded.settled) * 1000) / (drained.atMs - loaded.atMs)),
          backlog_after_drain: drained.due,
        },
        null,
        2,
      ),
    );
  } finally {
    await db.end();
    await stopServer(child);
  }
}

await main();
