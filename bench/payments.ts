/*
 * `npm run bench`: payments throughput and latency against a running service, printed with the
 * target of each scenario beside it (met / not met) and written into docs/performance.md:
 * create with confirm over REST, Connect JSON, Connect binary and gRPC (bench/grpc.ts, h2load);
 * create, then confirm with the secret key over REST and Connect JSON; the two-step checkout
 * (create with the secret key, confirm with the publishable key and client_secret); a realistic mix
 * of operations with the drain of its jobs (bench/mix.ts); webhooks (bench/webhooks.ts); one to
 * three instances behind HAProxy (bench/scale-out.ts); and, when BENCH_GROWN_DATABASE_URL names a
 * database `npm run bench:seed` filled, create with confirm, retrieves and filtered lists on it
 * (bench/grown.ts). Each round also sends REST's create with confirm to the limit server
 * (bench/limit-server.mjs: the payment, its event and delivery in one statement, no framework) on
 * the same database, and REST's row gives its ratio to that limit. BENCH_BASELINE=<commit> also
 * compares REST's create with confirm with the service as that commit built it, each build on a
 * fresh database of its own, interleaved round by round (bench/baseline.ts).
 *
 * BENCH_URL + BENCH_ADMIN_KEY point it at a service that is already running (with DATABASE_URL its
 * database, whose jobs table the mix reads); without them it starts
 * one (`npm start`, WORKERS = one per core but one unless set) on DATABASE_URL, by default a `payments_bench`
 * database in the local PostgreSQL over its Unix socket, created afresh for each run so that every
 * run starts from the same state. BENCH_CONNECTIONS (50) and BENCH_SECONDS (10) size each scenario;
 * BENCH_ROUNDS (3) runs every scenario that many times, interleaved, and reports the median round,
 * because on a shared virtual machine the same code measures ±20 % from one minute to the next.
 * BENCH_MIX_SECONDS (60) is the mix's length; it runs once. BENCH_REPORT=- prints the report without
 * writing docs/performance.md (or names another file to write). A run shorter than these defaults marks
 * its figures in the document as a validation run. The gRPC scenario needs h2load (Debian's
 * nghttp2-client). The scale-out scenario starts instances of its own, so it runs only without BENCH_URL.
 */
import type { ChildProcess } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import os from "node:os";
import autocannon from "autocannon";
import { type ProtocolName, protocolOf, rest, type SavedCard } from "./flows.js";
import { measureGrpc } from "./grpc.js";
import { type GrownResult, grownReport, measureGrown } from "./grown.js";
import { type MixResult, measureMix } from "./mix.js";
import { measureScaleOut, type ScaleOutRound, scaleOutReport } from "./scale-out.js";
import { type BenchMerchant, benchTarget, describeDatabase, newMerchant, stopServer, verdict } from "./service.js";
import { type DeliveryFigures, measureWebhooks, type WebhookRound } from "./webhooks.js";
import { startLimitServer } from "./limit.js";
import { type BaselineComparison, baselineReport, compareWithBaseline } from "./baseline.js";

const connections = Number(process.env.BENCH_CONNECTIONS ?? 50);
const seconds = Number(process.env.BENCH_SECONDS ?? 10);
const roundCount = Number(process.env.BENCH_ROUNDS ?? 3);
const mixSeconds = Number(process.env.BENCH_MIX_SECONDS ?? 60);
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

/** Creates with the secret key, then confirms as a checkout page does: the publishable key and the payment's client_secret. */
function checkoutRequests(merchant: BenchMerchant): autocannon.Request[] {
  const headers = (apiKey: string) => ({ "content-type": "application/json", "api-key": apiKey });
  return [
    {
      method: "POST",
      path: "/payments",
      headers: headers(merchant.apiKey),
      body: JSON.stringify(rest.create(merchant.profileId)),
      onResponse: (status, body, context) => {
        if (status === 200) {
          const payment = JSON.parse(body) as { payment_id: string; client_secret: string };
          Object.assign(context, { paymentId: payment.payment_id, clientSecret: payment.client_secret });
        }
      },
    },
    {
      method: "POST",
      headers: headers(merchant.publishableKey),
      setupRequest: (req, context) => {
        const { paymentId, clientSecret } = context as { paymentId: string; clientSecret: string };
        return { ...req, path: `/payments/${paymentId}/confirm`, body: JSON.stringify(rest.checkoutConfirm(clientSecret)) };
      },
    },
  ];
}

/** One scenario of the rounds: what it is called in the report and how autocannon calls it. */
interface Scenario {
  readonly scenario: string;
  readonly protocol: string;
  /** Where it sends its requests, when not to the service (the limit server). */
  readonly url?: string;
  /** The requests of one payment, in order; undefined for the gRPC scenario, which h2load drives. */
  requests(): autocannon.Request[] | undefined;
}

/** The name of the limit scenario's protocol column: the same REST requests, to a server that does the least. */
const limitProtocol = "REST, limit";

/** Saves the 4242 card for a new customer of the merchant with a multi-use mandate (a zero-amount setup). */
async function savedCardOf(url: string, merchant: BenchMerchant): Promise<SavedCard> {
  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", "api-key": merchant.apiKey },
      body: JSON.stringify(body),
    });
    if (res.status !== 200) throw new Error(`POST ${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as Record<string, string>;
  };
  const customerId = (await post("/customers", {})).customer_id!;
  const setup = await post("/payments", rest.offSessionSetup(merchant.profileId, customerId));
  if (setup.status !== "succeeded" || setup.mandate_id === undefined)
    throw new Error(`the setup did not make a mandate: ${JSON.stringify(setup)}`);
  return { customerId, paymentMethodId: setup.payment_method_id! };
}

/** Every scenario of a round, in the order they run; the limit right after the REST create it bounds. */
function scenariosOf(merchant: BenchMerchant, limitUrl: string, saved: SavedCard): Scenario[] {
  const oneOrTwoSteps = (protocolName: ProtocolName, twoStep: boolean): Scenario => ({
    scenario: twoStep ? "create, then confirm" : "create with confirm",
    protocol: protocolName,
    requests: () => {
      const protocol = protocolOf(protocolName, merchant.profileId);
      const headers = { "content-type": protocol.contentType, "api-key": merchant.apiKey };
      if (!twoStep) return [{ method: "POST", path: protocol.createPath, headers, body: protocol.create(true) }];
      return [
        {
          method: "POST",
          path: protocol.createPath,
          headers,
          body: protocol.create(false),
          onResponse: (status, body, context) => {
            if (status === 200) (context as { paymentId?: string }).paymentId = protocol.idOf(body);
          },
        },
        {
          method: "POST",
          headers,
          setupRequest: (req, context) => {
            const id = (context as { paymentId: string }).paymentId;
            return { ...req, path: protocol.confirmPath(id), body: protocol.confirm(id) };
          },
        },
      ];
    },
  });
  return [
    oneOrTwoSteps("REST", false),
    { ...oneOrTwoSteps("REST", false), protocol: limitProtocol, url: limitUrl },
    oneOrTwoSteps("REST", true),
    {
      scenario: "off-session charge",
      protocol: "REST",
      requests: () => [
        {
          method: "POST",
          path: "/payments",
          headers: { "content-type": "application/json", "api-key": merchant.apiKey },
          body: JSON.stringify(rest.offSessionCharge(merchant.profileId, saved)),
        },
      ],
    },
    { scenario: "two-step checkout", protocol: "REST", requests: () => checkoutRequests(merchant) },
    oneOrTwoSteps("Connect JSON", false),
    oneOrTwoSteps("Connect JSON", true),
    oneOrTwoSteps("Connect binary", false),
    { scenario: "create with confirm", protocol: "gRPC", requests: () => undefined },
  ];
}

async function run(url: string, scenario: Scenario, grpcMerchant: BenchMerchant): Promise<Result> {
  const requests = scenario.requests();
  if (requests === undefined) {
    const grpc = await measureGrpc(url, grpcMerchant, { connections, seconds });
    const perSecond = Math.round(grpc.answered / seconds);
    return { ...scenario, paymentsPerSecond: perSecond, requestsPerSecond: perSecond, p50: grpc.p50, p99: grpc.p99, errors: grpc.errors };
  }
  const result = await autocannon({ url: scenario.url ?? url, connections, duration: seconds, requests });
  const completed = result.requests.total / requests.length;
  return {
    scenario: scenario.scenario,
    protocol: scenario.protocol,
    paymentsPerSecond: Math.round(completed / seconds),
    requestsPerSecond: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.non2xx,
  };
}

async function main(): Promise<void> {
  const loadBefore = os.loadavg()[0]!;
  const { url, adminKey, databaseUrl, child } = await benchTarget("payments_bench", workers);
  let limit: { url: string; child: ChildProcess } | undefined;
  try {
    const merchant = await newMerchant(url, adminKey);
    // gRPC's merchant is its own: the scenario counts the payments it gained to check grpc-status.
    const grpcMerchant = await newMerchant(url, adminKey);
    limit = await startLimitServer(databaseUrl, merchant);
    const scenarios = scenariosOf(merchant, limit.url, await savedCardOf(url, merchant));
    const rounds: Result[][] = [];
    // Warm-up, as long as a scenario: JIT, connection pools, caches and the first growth of the
    // fresh tables, not measured.
    await autocannon({ url, connections, duration: seconds, requests: scenarios[0]!.requests()! });
    for (let round = 0; round < roundCount; round++) {
      const results: Result[] = [];
      for (const scenario of scenarios) {
        const result = await run(url, scenario, grpcMerchant);
        results.push(result);
        console.log(JSON.stringify({ round: round + 1, ...result }));
      }
      rounds.push(results);
    }
    const results = rounds[0]!.map((_, i) => medianRound(rounds.map((r) => r[i]!)));
    const mix = await measureMix(url, await newMerchant(url, adminKey), databaseUrl, { connections, seconds: mixSeconds });
    console.log(JSON.stringify({ scenario: "realistic mix", ...mix }));
    const webhooks = await measureWebhooks(
      url,
      (webhookUrl) => newMerchant(url, adminKey, webhookUrl),
      (id) => rest.create(id, { confirm: true }),
      {
        connections,
        seconds,
        rounds: roundCount,
      },
    );
    // The scale-out scenario's instances share the database: the service measured so far stops first.
    await stopServer(child);
    await stopServer(limit.child);
    const baselineRef = process.env.BENCH_BASELINE;
    const baseline =
      baselineRef === undefined || child === undefined
        ? undefined
        : await compareWithBaseline(baselineRef, databaseUrl, { connections, seconds, rounds: roundCount, workers });
    const scaleOut = child === undefined ? undefined : await measureScaleOut(databaseUrl, { connections, seconds, rounds: roundCount });
    const grownDatabaseUrl = process.env.BENCH_GROWN_DATABASE_URL;
    const grown =
      grownDatabaseUrl === undefined
        ? undefined
        : await measureGrown(grownDatabaseUrl, { connections, seconds, rounds: roundCount, workers });
    await writeReport(
      results,
      mix,
      webhooks,
      scaleOut,
      grown,
      baseline,
      process.env.BENCH_URL === undefined ? await describeDatabase(databaseUrl) : "as configured on BENCH_URL",
      loadBefore,
    );
  } finally {
    await stopServer(child);
    await stopServer(limit?.child);
  }
}

/** A row's target (the issue that set it) and whether the row meets it; "—" for scenarios without one. */
function targetOf(row: Summary, rows: readonly Summary[]): string {
  const p99Under50 = row.p99 < 50;
  if (row.scenario === "create with confirm" && row.protocol === "REST") {
    const limit = rows.find((r) => r.protocol === limitProtocol)!;
    const ratio = row.paymentsPerSecond / limit.paymentsPerSecond;
    return (
      `≥ 1,500/s, p99 < 50 ms (issue 3): ${verdict(row.paymentsPerSecond >= 1500 && p99Under50 && row.errors === 0)}; ` +
      `${ratio.toFixed(2)} × the limit, ≥ 0.7 (issue 40): ${verdict(ratio >= 0.7)}`
    );
  }
  if (row.protocol === limitProtocol) return "the bound of REST's row (bench/limit-server.mjs)";
  if (row.scenario === "create with confirm") {
    const restRow = rows.find((r) => r.scenario === "create with confirm" && r.protocol === "REST")!;
    return `≥ REST's ${restRow.paymentsPerSecond}/s (issue 20): ${verdict(row.paymentsPerSecond >= restRow.paymentsPerSecond && row.errors === 0)}`;
  }
  if (row.scenario === "off-session charge") {
    const restRow = rows.find((r) => r.scenario === "create with confirm" && r.protocol === "REST")!;
    const ratio = row.paymentsPerSecond / restRow.paymentsPerSecond;
    return `${ratio.toFixed(2)} × REST's create with confirm, ≥ 0.9 (issue 41): ${verdict(ratio >= 0.9 && row.errors === 0)}`;
  }
  if (row.scenario === "two-step checkout") {
    return `≥ 2,500/s, p99 < 50 ms per request (issue 20): ${verdict(row.paymentsPerSecond >= 2500 && p99Under50 && row.errors === 0)}`;
  }
  return "—";
}

/** The realistic mix's part of the report: its figures, each call's, the drain, and the target. */
function mixReport(mix: MixResult): string {
  const drained = mix.drainMs === undefined ? `not within ${60} s` : `${mix.drainMs} ms`;
  const met = mix.operationsPerSecond >= 3000 && mix.p99 < 50 && mix.errors === 0 && mix.drainMs !== undefined && mix.drainMs <= 5000;
  const rows = mix.calls.map((c) => `| ${c.call} | ${c.requests} | ${c.p50} | ${c.p99} | ${c.errors} |`);
  return `Realistic mix (bench/mix.ts): ${mix.seconds} s of ${connections} concurrent flows over undici keep-alive connections, REST;
of the requests 55 % create with confirm, 10 % two-step checkouts (create, then confirm with the publishable
key), 10 % manual captures (authorize, then capture), 10 % partial refunds (100 of a paid 1000), 10 %
retrieves, 5 % lists (\`/payments/list?limit=10\`). Drained: the time from the last answer until the
merchant has no pending job and no pending refund.

| Operations/s | Requests | p50 ms | p99 ms | Errors | Drained after | Target (issue 20) |
|---|---|---|---|---|---|---|
| ${mix.operationsPerSecond} | ${mix.requests} | ${mix.p50} | ${mix.p99} | ${mix.errors} | ${drained} | ≥ 3,000/s, p99 < 50 ms, no errors, drained ≤ 5 s: ${verdict(met)} |

| Call | Requests | p50 ms | p99 ms | Errors |
|---|---|---|---|---|
${rows.join("\n")}${mix.failedRefunds > 0 ? `\n\n${mix.failedRefunds} refund(s) ended failed.` : ""}`;
}

/** The webhook scenario's part of the report: throughput without and with webhooks, delivery delays, and the targets. */
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

| Webhooks | Payments/s | p99 ms | Errors | Target (issue 16) |
|---|---|---|---|---|
| off | ${off.paymentsPerSecond} | ${off.p99} | ${rounds.filter((r) => !r.webhooks).reduce((n, r) => n + r.errors, 0)} | — |
| on | ${on.paymentsPerSecond} (${change >= 0 ? "+" : ""}${change} %) | ${on.p99} | ${rounds.filter((r) => r.webhooks).reduce((n, r) => n + r.errors, 0)} | within 15 % of off: ${verdict(change >= -15)} |

Deliveries: ${delivery.delivered} events arrived, ${delivery.duplicates} twice; delay p50 ${delivery.delayP50} ms, p99 ${delivery.delayP99} ms, max ${delivery.delayMax} ms; the last arrived ${delivery.drainMs} ms after the load stopped. Target (issue 16), delay p99 < 1 s: ${verdict(delivery.delayP99 < 1000)}.`;
}

/**
 * Where the report goes: docs/performance.md unless BENCH_REPORT names another file, or is "-" to
 * print it only, so that a run made to check a change does not replace the committed figures.
 */
const reportFile =
  process.env.BENCH_REPORT === undefined
    ? new URL("../docs/performance.md", import.meta.url)
    : process.env.BENCH_REPORT === "-"
      ? undefined
      : process.env.BENCH_REPORT;
const startMarker = "<!-- bench:start -->";
const endMarker = "<!-- bench:end -->";
const scaleOutStart = "<!-- bench:scale-out:start -->";
const scaleOutEnd = "<!-- bench:scale-out:end -->";

/** Replaces the measured part of docs/performance.md, keeping the analysis written around it. */
async function writeReport(
  results: Summary[],
  mix: MixResult,
  webhooks: { rounds: WebhookRound[]; delivery: DeliveryFigures },
  scaleOut: ScaleOutRound[] | undefined,
  grown: GrownResult | undefined,
  baseline: BaselineComparison | undefined,
  database: string,
  loadBefore: number,
): Promise<void> {
  const cpus = os.cpus();
  const machine = `${cpus.length} × ${cpus[0]?.model.trim() ?? "unknown CPU"}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.type()} ${os.release()}; load average ${loadBefore.toFixed(1)} when the run began`;
  const rows = results.map(
    (r) =>
      `| ${r.scenario} | ${r.protocol} | ${r.paymentsPerSecond} | ${r.slowest}–${r.fastest} | ${r.requestsPerSecond} | ${r.p50} | ${r.p99} | ${r.errors} | ${targetOf(r, results)} |`,
  );
  // Shorter than the defaults is a check of the harness, never a result: the block says so itself.
  const validation =
    seconds < 10 || roundCount < 3 || mixSeconds < 60
      ? `
**Validation run, not a result**: BENCH_SECONDS=${seconds}, BENCH_ROUNDS=${roundCount}, BENCH_MIX_SECONDS=${mixSeconds}, shorter
than the defaults (10, 3, 60), on a machine that may have been busy (its load average is below) —
these figures only show that every scenario runs; re-measure with \`npm run bench\` on a quiet
machine before quoting any of them.
`
      : "";
  const measured = `${startMarker}${validation}
Measured by \`npm run bench\` (bench/payments.ts): autocannon with ${connections} concurrent
connections for ${seconds} s per scenario (h2load, ${connections} HTTP/2 connections of one stream each, for gRPC),
after a ${seconds} s warm-up, against the service started with
\`npm start\` on the same machine (by default on a database created afresh for the run). Each
payment uses the 4242 test card (sandbox processor).
"create with confirm" is one request per payment; "create, then confirm" two, both with the secret
key; "two-step checkout" two, the create with the secret key and the confirm as a checkout page sends
it, with the publishable key and the payment's \`client_secret\`. Connect JSON and binary are
\`application/json\` and \`application/proto\`; gRPC's answers are checked by their \`grpc-status\` (bench/grpc.ts).
Every scenario ran ${roundCount} time(s), interleaved; each row is the round with the median throughput
(its latencies too), with the slowest and fastest round beside it. Errors are summed over the rounds.

- Date: ${new Date().toISOString().slice(0, 10)}
- Machine: ${machine}
- Node: ${process.version}; service: ${process.env.BENCH_URL === undefined ? `${workers} worker(s) (WORKERS), each a full instance` : process.env.BENCH_URL}
- Database: ${database}

| Scenario | Protocol | Payments/s | Range of rounds | Requests/s | p50 ms | p99 ms | Errors | Target |
|---|---|---|---|---|---|---|---|---|
${rows.join("\n")}

${mixReport(mix)}

${webhookReport(webhooks)}

${
  baseline === undefined
    ? "Against a baseline: not measured in this run (BENCH_BASELINE names the commit to compare with; bench/baseline.ts)."
    : baselineReport(baseline, seconds)
}

${
  grown === undefined
    ? 'Grown database: not measured in this run (BENCH_GROWN_DATABASE_URL names a database `npm run bench:seed` filled; docs/performance.md, "Grown database").'
    : grownReport(grown, results.find((r) => r.scenario === "create with confirm" && r.protocol === "REST")!.paymentsPerSecond, seconds)
}
${endMarker}`;
  const current = reportFile === undefined ? "# Performance\n" : await readFile(reportFile, "utf8").catch(() => "# Performance\n");
  let report = replaceBetween(current, startMarker, endMarker, measured);
  if (scaleOut !== undefined) {
    const options = { connections, seconds, rounds: roundCount };
    const scaled = `${scaleOutStart}${validation}
Measured by \`npm run bench\` on ${new Date().toISOString().slice(0, 10)}; machine: ${machine}; database: ${database}.

${scaleOutReport(scaleOut, options)}
${scaleOutEnd}`;
    report = replaceBetween(report, scaleOutStart, scaleOutEnd, scaled);
    console.log(scaled);
  }
  if (reportFile !== undefined) await writeFile(reportFile, report);
  console.log(measured);
}

/** `current` with the text from `start` to `end` replaced by `text` (which holds both), or with `text` appended when they are missing. */
function replaceBetween(current: string, start: string, end: string, text: string): string {
  const from = current.indexOf(start);
  const to = current.indexOf(end);
  return from >= 0 && to > from ? current.slice(0, from) + text + current.slice(to + end.length) : `${current.trimEnd()}\n\n${text}\n`;
}

await main();
