import * as fc from "fast-check";
import { afterAll, beforeAll, it } from "vitest";
import { BatchCheck } from "./batch-check.js";
import { fixtureCardNumbers } from "./fixtures.js";
import { FuzzTarget } from "./fuzz-target.js";
import { HeaderArbitraries } from "./header-arbitraries.js";
import { JsonBodies } from "./json-body-arbitraries.js";
import { cardNumbersInLog, Oracle, type Violation } from "./oracle.js";
import { ProtoMessages } from "./proto-message-arbitraries.js";
import { rawHttpRequests } from "./raw-http.js";
import { RestArbitraries } from "./rest-arbitraries.js";
import { RpcArbitraries } from "./rpc-arbitraries.js";
import { mebibytes, memoryGrowthBound, RunSummary } from "./run-summary.js";
import { loadApiSchema, type ApiSchema } from "./schema.js";
import { readSettings } from "./settings.js";
import { FieldValues } from "./value-arbitraries.js";

/*
 * The property-based fuzz suite (npm run test:fuzz): every REST route and every RPC of the protos,
 * over REST, Connect, gRPC, gRPC-Web and raw HTTP/1.1, against one real server process. Each
 * fast-check run is one batch of FUZZ_CONCURRENCY requests sent at once.
 */

const settings = readSettings();
console.log(`fuzz seed: ${settings.seed} (replay: FUZZ_SEED=${settings.seed} npm run test:fuzz)`);

let schema: ApiSchema;
let target: FuzzTarget | undefined;

beforeAll(async () => {
  schema = await loadApiSchema();
  target = await FuzzTarget.start(settings.concurrency);
});

afterAll(async () => {
  await target?.stop();
});

it(`every answer to ${settings.requests} fuzzed requests keeps the API contract`, async () => {
  const running = target!;
  const summary = new RunSummary();
  const check = new BatchCheck(running, new Oracle(schema), summary, settings.collect);
  try {
    await fc.assert(property(running, check, summary), {
      seed: settings.seed,
      path: settings.path,
      numRuns: Math.ceil(settings.requests / settings.concurrency),
      includeErrorInReport: true,
    });
    const endOfRun = [...logLeaks(running, check), ...memoryGrowth(summary)];
    if (settings.collect) {
      for (const violation of endOfRun) summary.collect(violation);
    } else if (endOfRun.length > 0) {
      throw new Error(describeViolations(endOfRun));
    }
    if (settings.collect && summary.violationKinds > 0)
      throw new Error(`${summary.violationKinds} distinct violations (listed in the summary above)`);
  } catch (error) {
    throw withReplayHint(error);
  } finally {
    console.log(
      summary.format({ count: running.restarts, millis: running.restartMillis }, running.output.stdout, check.sentCardNumbers.size),
    );
  }
});

/** The property: one batch of requests, every answer within the contract. */
function property(running: FuzzTarget, check: BatchCheck, summary: RunSummary) {
  const values = new FieldValues(running.fixtures);
  const bodies = new JsonBodies(values);
  const headers = new HeaderArbitraries(running.fixtures, running.adminApiKey);
  const rest = new RestArbitraries(schema, values, bodies, headers);
  const rpc = new RpcArbitraries(schema, bodies, new ProtoMessages(values), headers);
  const request = fc.oneof(
    { weight: 40, arbitrary: rest.request() },
    { weight: 20, arbitrary: rpc.connect() },
    { weight: 15, arbitrary: rpc.grpc() },
    { weight: 15, arbitrary: rpc.grpcWeb() },
    { weight: 3, arbitrary: rawHttpRequests(schema, running.fixtures.keys) },
  );
  let firstFailureAt: number | undefined;
  return fc.asyncProperty(fc.array(request, { minLength: settings.concurrency, maxLength: settings.concurrency }), async (batch) => {
    // Once the shrink budget is spent every further candidate passes untried, which ends shrinking
    // at the smallest failing batch found so far.
    if (firstFailureAt !== undefined && Date.now() - firstFailureAt > settings.shrinkSeconds * 1000) return true;
    const violations = await check.check(batch);
    if (settings.collect) {
      for (const violation of violations) summary.collect(violation);
      return true;
    }
    if (violations.length === 0) return true;
    firstFailureAt ??= Date.now();
    throw new Error(describeViolations(violations));
  });
}

/** Oracle 5, second half: no card number sent in a card_number field reached the server's output. */
function logLeaks(running: FuzzTarget, check: BatchCheck): Violation[] {
  const sent = new Set([...check.sentCardNumbers, ...fixtureCardNumbers]);
  const leaks = cardNumbersInLog([...running.output.stdout, ...running.output.stderr], sent);
  return leaks.slice(0, 1).map(({ number, line }) => ({
    kind: "server: card number of a card_number field in the log",
    detail: `${number} (${leaks.length} lines in all), e.g. ${line.slice(0, 2000)}`,
  }));
}

/**
 * Oracle 6, memory growth: the median of the last tenth of the samples against the median of the
 * second tenth (the first tenth is warm-up: JIT, pools, caches). Too few batches say nothing.
 */
function memoryGrowth(summary: RunSummary): Violation[] {
  const samples = summary.residentSamples;
  if (samples.length < 100) return [];
  const tenth = Math.floor(samples.length / 10);
  const early = median(samples.slice(tenth, 2 * tenth));
  const late = median(samples.slice(-tenth));
  if (late <= memoryGrowthBound(early)) return [];
  return [
    {
      kind: "server: resident memory keeps growing",
      detail: `median VmRSS ${mebibytes(early)} early in the run, ${mebibytes(late)} at its end (bound ${mebibytes(memoryGrowthBound(early))})`,
    },
  ];
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

function describeViolations(violations: readonly Violation[]): string {
  const shown = violations.slice(0, 5).map((v) => `✗ ${v.kind}\n  ${v.detail.replace(/\n/g, "\n  ")}`);
  if (violations.length > shown.length) shown.push(`… and ${violations.length - shown.length} more in this batch`);
  return shown.join("\n");
}

/** fast-check prints seed and path; this adds the command that replays them. */
function withReplayHint(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  const path = /path: "([^"]*)"/.exec(error.message)?.[1];
  if (path !== undefined)
    error.message += `\n\nreplay: FUZZ_SEED=${settings.seed} FUZZ_PATH=${path} FUZZ_CONCURRENCY=${settings.concurrency} npm run test:fuzz`;
  return error;
}
