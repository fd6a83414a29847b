/*
 * `npm run bench`: payments throughput and latency against a running service, over REST and over
 * Connect, with webhooks, and from one to three instances behind HAProxy (bench/scale-out.ts),
 * written into docs/performance.md.
 *
 * BENCH_URL + BENCH_ADMIN_KEY point it at a service that is already running; without them it starts
 * one (`npm start`, WORKERS = one per core but one unless set) on DATABASE_URL, by default a `payments_bench`
 * database in the local PostgreSQL over its Unix socket, created afresh for each run so that every
 * run starts from the same state. BENCH_CONNECTIONS (50) and BENCH_SECONDS (10) size each scenario;
 * BENCH_ROUNDS (3) runs every scenario that many times, interleaved, and reports the median round,
 * because on a shared virtual machine the same code measures ±20 % from one minute to the next.
 * The scale-out scenario starts instances of its own, so it runs only without BENCH_URL.
 */
import { readFile, writeFile } from "node:fs/promises";
import os from "node:os";
import autocannon from "autocannon";
import pg from "pg";
import { measureScaleOut, type ScaleOutRound, scaleOutReport } from "./scale-out.js";
import { benchTarget, card, confirmedPayment, newMerchant, stopServer } from "./service.js";
import { type DeliveryFigures, measureWebhooks, type WebhookRound } from "./webhooks.js";

const connections = Number(process.env.BENCH_CONNECTIONS ?? 50);
const seconds = Number(process.env.BENCH_SECONDS ?? 10);
const roundCount = Number(process.env.BENCH_ROUNDS ?? 3);
// The service shares this machine with PostgreSQL and the load generator, which take about half of
// the CPU per payment: one core is left to them (docs/performance.md, "Workers").
const workers = process.env.WORKERS ?? String(Math.max(1, os.cpus().length - 1));

interface Result {
  scenario: string;
  protocol: string;
  paymentsPerSecond: number;
  requestsPerSecond: number;
  p50: number;
  p99: number;
  errors: number;
}

/** One scenario's rounds: the round with the median throughput, with the range of all rounds. */
interface Summary extends Result {
  slowest: number;
  fastest: number;
}

function medianRound(results: Result[]): Summary {
  const sorted = [...results].sort((a, b) => a.paymentsPerSecond - b.paymentsPerSecond);
  const median = sorted[Math.floor((sorted.length - 1) / 2)]!;
  return {
    ...median,
    slowest: sorted[0]!.paymentsPerSecond,
    fastest: sorted.at(-1)!.paymentsPerSecond,
    errors: results.reduce((n, r) => n + r.errors, 0),
  };
}

/** Request shapes of one protocol: REST speaks the documented dialect, Connect proto JSON. */
function protocolOf(name: "REST" | "Connect", profileId: string) {
  if (name === "REST") {
    return {
      createPath: "/payments",
      confirmPath: (id: string) => `/payments/${id}/confirm`,
      create: (confirm: boolean) => (confirm ? confirmedPayment(profileId) : { amount: 1000, currency: "USD", profile_id: profileId }),
      confirm: (_id: string) => ({ payment_method_data: { card } }),
      idOf: (body: string) => (JSON.parse(body) as { payment_id: string }).payment_id,
    };
  }
  const connectCard = {
    cardNumber: card.card_number,
    cardExpMonth: card.card_exp_month,
    cardExpYear: card.card_exp_year,
    cardCvc: card.card_cvc,
  };
  return {
    createPath: "/paymentservice.v1.PaymentService/CreatePayment",
    confirmPath: (_id: string) => "/paymentservice.v1.PaymentService/ConfirmPayment",
    create: (confirm: boolean) => ({
      amount: "1000",
      currency: "USD",
      profileId,
      ...(confirm ? { confirm: true, paymentMethodData: { card: connectCard } } : {}),
    }),
    confirm: (id: string) => ({ paymentId: id, paymentMethodData: { card: connectCard } }),
    idOf: (body: string) => (JSON.parse(body) as { paymentId: string }).paymentId,
  };
}

async function run(url: string, apiKey: string, profileId: string, protocolName: "REST" | "Connect", twoStep: boolean): Promise<Result> {
  const protocol = protocolOf(protocolName, profileId);
  const headers = { "content-type": "application/json", "api-key": apiKey };
  const requests: autocannon.Request[] = twoStep
    ? [
        { method: "POST", path: protocol.createPath, headers, body: JSON.stringify(protocol.create(false)) },
        {
          method: "POST",
          headers,
          setupRequest: (req, context) => {
            const id = (context as { paymentId: string }).paymentId;
            return { ...req, path: protocol.confirmPath(id), body: JSON.stringify(protocol.confirm(id)) };
          },
        },
      ]
    : [{ method: "POST", path: protocol.createPath, headers, body: JSON.stringify(protocol.create(true)) }];
  if (twoStep) {
    requests[0]!.onResponse = (status, body, context) => {
      if (status === 200) (context as { paymentId?: string }).paymentId = protocol.idOf(body);
    };
  }
  const result = await autocannon({ url, connections, duration: seconds, requests });
  const completed = result.requests.total / requests.length;
  return {
    scenario: twoStep ? "create, then confirm" : "create with confirm",
    protocol: protocolName,
    paymentsPerSecond: Math.round(completed / seconds),
    requestsPerSecond: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.non2xx,
  };
}

async function describeDatabase(databaseUrl: string): Promise<string> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const version = (await client.query<{ v: string }>("SELECT split_part(version(), ' on ', 1) AS v")).rows[0]!.v;
  const fsync = (await client.query<{ fsync: string }>("SHOW fsync")).rows[0]!.fsync;
  const commit = (await client.query<{ synchronous_commit: string }>("SHOW synchronous_commit")).rows[0]!.synchronous_commit;
  await client.end();
  const via = new URL(databaseUrl).searchParams.get("host") ?? new URL(databaseUrl).host;
  return `${version} on this machine via ${via} (fsync=${fsync}, synchronous_commit=${commit})`;
}

async function main(): Promise<void> {
  const { url, adminKey, databaseUrl, child } = await benchTarget("payments_bench", workers);
  try {
    const { apiKey, profileId } = await newMerchant(url, adminKey);
    const rounds: Result[][] = [];
    // Warm-up, as long as a scenario: JIT, connection pools, caches and the first growth of the
    // fresh tables, not measured.
    await autocannon({
      url,
      connections,
      duration: seconds,
      requests: [
        {
          method: "POST",
          path: "/payments",
          headers: { "content-type": "application/json", "api-key": apiKey },
          body: JSON.stringify(protocolOf("REST", profileId).create(true)),
        },
      ],
    });
    for (let round = 0; round < roundCount; round++) {
      const results: Result[] = [];
      for (const protocol of ["REST", "Connect"] as const) {
        for (const twoStep of [false, true]) {
          const result = await run(url, apiKey, profileId, protocol, twoStep);
          results.push(result);
          console.log(JSON.stringify({ round: round + 1, ...result }));
        }
      }
      rounds.push(results);
    }
    const results = rounds[0]!.map((_, i) => medianRound(rounds.map((r) => r[i]!)));
    const webhooks = await measureWebhooks(
      url,
      (webhookUrl) => newMerchant(url, adminKey, webhookUrl),
      (id) => protocolOf("REST", id).create(true),
      {
        connections,
        seconds,
        rounds: roundCount,
      },
    );
    // The scale-out scenario's instances share the database: the service measured so far stops first.
    await stopServer(child);
    const scaleOut = child === undefined ? undefined : await measureScaleOut(databaseUrl, { connections, seconds, rounds: roundCount });
    await writeReport(
      results,
      webhooks,
      scaleOut,
      process.env.BENCH_URL === undefined ? await describeDatabase(databaseUrl) : "as configured on BENCH_URL",
    );
  } finally {
    await stopServer(child);
  }
}

/** The webhook scenario's part of the report: throughput without and with webhooks, and delivery delays. */
function webhookReport({ rounds, delivery }: { rounds: WebhookRound[]; delivery: DeliveryFigures }): string {
  const median = (webhooks: boolean) => {
    const sorted = rounds.filter((r) => r.webhooks === webhooks).sort((a, b) => a.paymentsPerSecond - b.paymentsPerSecond);
    return sorted[Math.floor((sorted.length - 1) / 2)]!;
  };
  const [off, on] = [median(false), median(true)];
  const change = Math.round((100 * (on.paymentsPerSecond - off.paymentsPerSecond)) / off.paymentsPerSecond);
  return `Webhooks (bench/webhooks.ts): "create with confirm" over REST for a merchant without a webhook_url and for one
whose profile sends every event to a receiver on this machine that answers 204 at once, interleaved; the
median round of each. The delay runs from an event's \`created\` (just before its commit) to its arrival.

| Webhooks | Payments/s | p99 ms | Errors |
|---|---|---|---|
| off | ${off.paymentsPerSecond} | ${off.p99} | ${rounds.filter((r) => !r.webhooks).reduce((n, r) => n + r.errors, 0)} |
| on | ${on.paymentsPerSecond} (${change >= 0 ? "+" : ""}${change} %) | ${on.p99} | ${rounds.filter((r) => r.webhooks).reduce((n, r) => n + r.errors, 0)} |

Deliveries: ${delivery.delivered} events arrived, ${delivery.duplicates} twice; delay p50 ${delivery.delayP50} ms, p99 ${delivery.delayP99} ms, max ${delivery.delayMax} ms; the last arrived ${delivery.drainMs} ms after the load stopped.`;
}

const reportFile = new URL("../docs/performance.md", import.meta.url);
const startMarker = "<!-- bench:start -->";
const endMarker = "<!-- bench:end -->";
const scaleOutStart = "<!-- bench:scale-out:start -->";
const scaleOutEnd = "<!-- bench:scale-out:end -->";

/** Replaces the measured part of docs/performance.md, keeping the analysis written around it. */
async function writeReport(
  results: Summary[],
  webhooks: { rounds: WebhookRound[]; delivery: DeliveryFigures },
  scaleOut: ScaleOutRound[] | undefined,
  database: string,
): Promise<void> {
  const cpus = os.cpus();
  const machine = `${cpus.length} × ${cpus[0]?.model.trim() ?? "unknown CPU"}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.type()} ${os.release()}`;
  const rows = results.map(
    (r) =>
      `| ${r.scenario} | ${r.protocol} | ${r.paymentsPerSecond} | ${r.slowest}–${r.fastest} | ${r.requestsPerSecond} | ${r.p50} | ${r.p99} | ${r.errors} |`,
  );
  const measured = `${startMarker}
Measured by \`npm run bench\` (bench/payments.ts): autocannon with ${connections} concurrent
connections for ${seconds} s per scenario, after a ${seconds} s warm-up, against the service started with
\`npm start\` on the same machine (by default on a database created afresh for the run). Each
payment uses the 4242 test card (sandbox processor).
"create with confirm" is one request per payment; "create, then confirm" two. Every scenario ran
${roundCount} time(s), interleaved; each row is the round with the median throughput (its latencies
too), with the slowest and fastest round beside it. Errors are summed over the rounds.

- Date: ${new Date().toISOString().slice(0, 10)}
- Machine: ${machine}
- Node: ${process.version}; service: ${process.env.BENCH_URL === undefined ? `${workers} worker(s) (WORKERS), each a full instance` : process.env.BENCH_URL}
- Database: ${database}

| Scenario | Protocol | Payments/s | Range of rounds | Requests/s | p50 ms | p99 ms | Errors |
|---|---|---|---|---|---|---|---|
${rows.join("\n")}

${webhookReport(webhooks)}
${endMarker}`;
  let report = replaceBetween(await readFile(reportFile, "utf8").catch(() => "# Performance\n"), startMarker, endMarker, measured);
  if (scaleOut !== undefined) {
    const options = { connections, seconds, rounds: roundCount };
    const scaled = `${scaleOutStart}
Measured by \`npm run bench\` on ${new Date().toISOString().slice(0, 10)}; machine: ${machine}; database: ${database}.

${scaleOutReport(scaleOut, options)}
${scaleOutEnd}`;
    report = replaceBetween(report, scaleOutStart, scaleOutEnd, scaled);
    console.log(scaled);
  }
  await writeFile(reportFile, report);
  console.log(measured);
}

/** `current` with the text from `start` to `end` replaced by `text` (which holds both), or with `text` appended when they are missing. */
function replaceBetween(current: string, start: string, end: string, text: string): string {
  const from = current.indexOf(start);
  const to = current.indexOf(end);
  return from >= 0 && to > from ? current.slice(0, from) + text + current.slice(to + end.length) : `${current.trimEnd()}\n\n${text}\n`;
}

await main();
