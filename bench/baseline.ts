/*
 * What a change costs create with confirm (BENCH_BASELINE=<commit>): this checkout's service and the
 * service as that commit built it, each on a database of its own created afresh, loaded in turn
 * with the same requests, round after round, the order alternating, so that both meet the same
 * machine, the same drift of a shared host from one minute to the next, and tables of the same
 * size (issue 42: create with confirm with the ledger against the commit before it).
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { rest } from "./flows.js";
import { newMerchant, prepareDatabase, startServer, stopServer, verdict } from "./service.js";

const repositoryRoot = fileURLToPath(new URL("../", import.meta.url));

/** One build's rounds: its median round's payments/s and p99, and its range. */
export interface BuildFigures {
  readonly paymentsPerSecond: number;
  readonly p99: number;
  readonly slowest: number;
  readonly fastest: number;
  readonly errors: number;
}

/** What the comparison measured. */
export interface BaselineComparison {
  /** The baseline commit's short hash. */
  readonly commit: string;
  readonly current: BuildFigures;
  readonly baseline: BuildFigures;
  /** Each round's pair, in the order they ran, for the report. */
  readonly rounds: readonly { readonly current: number; readonly baseline: number }[];
}

/**
 * A worktree of `ref` under the system's temporary directory (made once, reused by later runs),
 * sharing this checkout's node_modules when both lock the same packages and installing its own
 * otherwise.
 */
function worktreeOf(ref: string): { commit: string; dir: string } {
  const git = (...args: string[]) => execFileSync("git", args, { cwd: repositoryRoot, encoding: "utf8" }).trim();
  const commit = git("rev-parse", "--short", `${ref}^{commit}`);
  const dir = join(tmpdir(), `payments-bench-baseline-${commit}`);
  if (!existsSync(dir)) git("worktree", "add", "--detach", dir, commit);
  if (!existsSync(join(dir, "node_modules"))) {
    const lock = (root: string) => readFileSync(join(root, "package-lock.json"), "utf8");
    if (lock(dir) === lock(repositoryRoot)) symlinkSync(join(repositoryRoot, "node_modules"), join(dir, "node_modules"), "dir");
    else execFileSync("npm", ["ci", "--no-audit", "--no-fund"], { cwd: dir, stdio: "inherit" });
  }
  return { commit, dir };
}

/** `databaseUrl` with its database's name suffixed. */
function suffixed(databaseUrl: string, suffix: string): string {
  const url = new URL(databaseUrl);
  url.pathname = `${url.pathname}_${suffix}`;
  return url.toString();
}

function median(rounds: readonly { paymentsPerSecond: number; p99: number; errors: number }[]): BuildFigures {
  const sorted = [...rounds].sort((a, b) => a.paymentsPerSecond - b.paymentsPerSecond);
  const middle = sorted[Math.floor((sorted.length - 1) / 2)]!;
  return {
    paymentsPerSecond: middle.paymentsPerSecond,
    p99: middle.p99,
    slowest: sorted[0]!.paymentsPerSecond,
    fastest: sorted.at(-1)!.paymentsPerSecond,
    errors: rounds.reduce((n, r) => n + r.errors, 0),
  };
}

/**
 * Starts this checkout's service and `ref`'s with `workers` workers, each on a fresh database of
 * `databaseUrl`'s server (`…_current`, `…_baseline`), warms both up, then loads each with REST's
 * create with confirm for `seconds` at `connections`, `rounds` times, alternating which goes first.
 */
export async function compareWithBaseline(
  ref: string,
  databaseUrl: string,
  options: { connections: number; seconds: number; rounds: number; workers: string },
): Promise<BaselineComparison> {
  const { commit, dir } = worktreeOf(ref);
  const builds = [
    { name: "current" as const, databaseUrl: suffixed(databaseUrl, "current"), cwd: undefined },
    { name: "baseline" as const, databaseUrl: suffixed(databaseUrl, "baseline"), cwd: dir },
  ];
  const started: {
    name: "current" | "baseline";
    url: string;
    requests: autocannon.Request[];
    child: Awaited<ReturnType<typeof startServer>>["child"];
  }[] = [];
  try {
    for (const build of builds) {
      await prepareDatabase(build.databaseUrl, true);
      const server = await startServer(build.databaseUrl, options.workers, {}, build.cwd);
      started.push({ name: build.name, url: server.url, requests: [], child: server.child });
      const merchant = await newMerchant(server.url, server.adminKey);
      started.at(-1)!.requests.push({
        method: "POST",
        path: "/payments",
        headers: { "content-type": "application/json", "api-key": merchant.apiKey },
        body: JSON.stringify(rest.create(merchant.profileId, { confirm: true })),
      });
    }
    const load = async (target: (typeof started)[number]) => {
      const result = await autocannon({
        url: target.url,
        connections: options.connections,
        duration: options.seconds,
        requests: target.requests,
      });
      const figures = {
        paymentsPerSecond: Math.round(result.requests.total / options.seconds),
        p99: result.latency.p99,
        errors: result.errors + result.non2xx,
      };
      console.log(
        JSON.stringify({
          scenario: "create with confirm",
          build: target.name === "baseline" ? `baseline ${commit}` : "current",
          ...figures,
        }),
      );
      return figures;
    };
    for (const target of started) await load(target);
    const measured = { current: [] as Awaited<ReturnType<typeof load>>[], baseline: [] as Awaited<ReturnType<typeof load>>[] };
    const rounds: { current: number; baseline: number }[] = [];
    for (let round = 0; round < options.rounds; round++) {
      const order = round % 2 === 0 ? started : [...started].reverse();
      const pair = { current: 0, baseline: 0 };
      for (const target of order) {
        const figures = await load(target);
        measured[target.name].push(figures);
        pair[target.name] = figures.paymentsPerSecond;
      }
      rounds.push(pair);
    }
    return { commit, current: median(measured.current), baseline: median(measured.baseline), rounds };
  } finally {
    for (const target of started) await stopServer(target.child);
  }
}

/** The comparison's part of the report. */
export function baselineReport(comparison: BaselineComparison, seconds: number): string {
  const { commit, current, baseline, rounds } = comparison;
  const ratio = current.paymentsPerSecond / baseline.paymentsPerSecond;
  const row = (name: string, f: BuildFigures) =>
    `| ${name} | ${f.paymentsPerSecond} | ${f.slowest}–${f.fastest} | ${f.p99} | ${f.errors} |`;
  return `Against the baseline (bench/baseline.ts, BENCH_BASELINE=${commit}): REST's create with confirm, ${seconds} s per
round, to this checkout's service and to the service as ${commit} built it, each on a database of its own created
afresh, after a warm-up of each, the order alternating each round (rounds: ${rounds.map((r) => `${r.current} / ${r.baseline}`).join(", ")}).

| Build | Payments/s (median round) | Range of rounds | p99 ms | Errors |
|---|---|---|---|---|
${row("this checkout", current)}
${row(`baseline ${commit}`, baseline)}

This checkout at ${ratio.toFixed(2)} × the baseline; target ≥ 0.9 with the ledger (issue 42): ${verdict(ratio >= 0.9 && current.errors === 0)}.`;
}
