/*
 * The scale-out scenario of `npm run bench`: "create with confirm" over REST against one instance
 * directly, then against one, two and three instances behind HAProxy, all on one PostgreSQL
 * database, interleaved, so one sees how throughput grows with instances (and what the load
 * balancer itself costs: one instance directly against one behind it).
 */
import { once } from "node:events";
import autocannon from "autocannon";
import { startLoadBalancer, type LoadBalancer } from "../test/support/load-balancer.js";
import { rest } from "./flows.js";
import { newMerchant, startServer } from "./service.js";

/** One round of one target. */
export interface ScaleOutRound {
  readonly target: string;
  readonly instances: number;
  readonly paymentsPerSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly errors: number;
}

/** What the scenario runs for how long. */
export interface ScaleOutOptions {
  readonly connections: number;
  readonly seconds: number;
  readonly rounds: number;
}

const instanceCount = 3;

/**
 * Starts three single-worker instances on `databaseUrl` and HAProxy in front of the first one, two
 * and three of them, and measures each target `rounds` times, interleaved, after a warm-up of every
 * instance. Every instance and load balancer is stopped before it returns.
 */
export async function measureScaleOut(databaseUrl: string, options: ScaleOutOptions): Promise<ScaleOutRound[]> {
  const servers: Awaited<ReturnType<typeof startServer>>[] = [];
  const balancers: LoadBalancer[] = [];
  try {
    for (let i = 0; i < instanceCount; i++) servers.push(await startServer(databaseUrl, "1"));
    for (let n = 1; n <= instanceCount; n++) balancers.push(await startLoadBalancer(servers.slice(0, n).map((s) => s.url)));
    const { apiKey, profileId } = await newMerchant(servers[0]!.url, servers[0]!.adminKey);
    const body = JSON.stringify(rest.create(profileId, { confirm: true }));
    const load = (url: string) =>
      autocannon({
        url,
        connections: options.connections,
        duration: options.seconds,
        requests: [{ method: "POST", path: "/payments", headers: { "content-type": "application/json", "api-key": apiKey }, body }],
      });
    // Warm-up through the three-instance balancer: JIT, pools and caches of every instance.
    await load(balancers[instanceCount - 1]!.url);
    const targets = [
      { target: "1 instance, directly", instances: 1, url: servers[0]!.url },
      ...balancers.map((balancer, i) => ({ target: `${i + 1} behind HAProxy`, instances: i + 1, url: balancer.url })),
    ];
    const rounds: ScaleOutRound[] = [];
    for (let round = 0; round < options.rounds; round++) {
      for (const { target, instances, url } of targets) {
        const result = await load(url);
        const measured = {
          target,
          instances,
          paymentsPerSecond: Math.round(result.requests.total / options.seconds),
          p50: result.latency.p50,
          p99: result.latency.p99,
          errors: result.errors + result.non2xx,
        };
        rounds.push(measured);
        console.log(JSON.stringify({ scenario: "scale-out", round: round + 1, ...measured }));
      }
    }
    return rounds;
  } finally {
    for (const balancer of balancers) await balancer.close();
    for (const { child } of servers) {
      child.kill("SIGTERM");
      if (child.exitCode === null && child.signalCode === null) await once(child, "exit");
    }
  }
}

/** The scenario's part of docs/performance.md: each target's median round, with the range of all. */
export function scaleOutReport(rounds: readonly ScaleOutRound[], options: ScaleOutOptions): string {
  const targets = [...new Set(rounds.map((r) => r.target))];
  const rows = targets.map((target) => {
    const sorted = rounds.filter((r) => r.target === target).sort((a, b) => a.paymentsPerSecond - b.paymentsPerSecond);
    const median = sorted[Math.floor((sorted.length - 1) / 2)]!;
    const errors = sorted.reduce((n, r) => n + r.errors, 0);
    return `| ${target} | ${median.paymentsPerSecond} | ${sorted[0]!.paymentsPerSecond}–${sorted.at(-1)!.paymentsPerSecond} | ${median.p50} | ${median.p99} | ${errors} |`;
  });
  return `Scale-out (bench/scale-out.ts): "create with confirm" over REST, ${options.connections} connections for
${options.seconds} s per target, against three instances (\`npm start\`, one worker each) on one database and
HAProxy (Debian's, test/support/load-balancer.ts) in front of the first one, two and three of them,
after a warm-up through all three; ${options.rounds} round(s), interleaved, each row the median round.

| Target | Payments/s | Range of rounds | p50 ms | p99 ms | Errors |
|---|---|---|---|---|---|
${rows.join("\n")}`;
}
