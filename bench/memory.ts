/*
 * `npm run bench:memory`: issue 20's memory target, one instance's RSS under 300 MB through the
 * realistic mix with no growth over 10 minutes. Written up by hand in docs/performance.md
 * ("Memory through the mix").
 *
 * Starts the production build (one worker, as `npm start` runs it) on DATABASE_URL, by default a
 * `memory_bench` database in the local PostgreSQL created afresh, and drives bench/mix.ts's mix
 * with BENCH_CONNECTIONS (50) connections for BENCH_MEMORY_SECONDS (600), reading the instance's
 * RSS every MEMORY_SAMPLE_SECONDS (30). The
 * verdict is the soak's (bench/service.ts, memoryVerdict): every sample under 300 MB, and the peak of
 * the last third within 10 % of the peak from the second minute to the end of the first third.
 */
import { measureMix } from "./mix.js";
import { memoryVerdict, newMerchant, prepareDatabase, rssMb, startServer, stopServer } from "./service.js";

const seconds = Number(process.env.BENCH_MEMORY_SECONDS ?? 600);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 50);
const sampleSeconds = Number(process.env.MEMORY_SAMPLE_SECONDS ?? 30);
const rssLimitMb = 300;

async function main(): Promise<void> {
  const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@localhost/memory_bench?host=/var/run/postgresql";
  await prepareDatabase(databaseUrl, process.env.DATABASE_URL === undefined);
  const { url, adminKey, child } = await startServer(databaseUrl, "1");
  try {
    const samples: { t: number; rssMb: number }[] = [];
    const started = Date.now();
    const sampler = setInterval(() => {
      const sample = { t: Math.round((Date.now() - started) / 1000), rssMb: rssMb(child.pid!) };
      samples.push(sample);
      console.log(JSON.stringify(sample));
    }, sampleSeconds * 1000);
    const mix = await measureMix(url, await newMerchant(url, adminKey), databaseUrl, { connections, seconds }).finally(() =>
      clearInterval(sampler),
    );
    const memory = memoryVerdict(samples, seconds, rssLimitMb);
    console.log(
      [
        `mix: ${mix.operationsPerSecond} operations/s over ${mix.seconds} s, p50 ${mix.p50} ms, p99 ${mix.p99} ms, ${mix.errors} errors`,
        `RSS: max ${memory.maxMb.toFixed(0)} MB (limit ${rssLimitMb}); peak ${memory.earlyPeakMb.toFixed(0)} MB from ${memory.earlyFrom} s to ${memory.earlyTo} s, ` +
          `${memory.latePeakMb.toFixed(0)} MB in the last third (×${(memory.latePeakMb / memory.earlyPeakMb).toFixed(2)}); ` +
          `from ${memory.settledFrom} s trend ${memory.trendMbPerMinute.toFixed(1)} MB/min: ${memory.bounded ? "met (bounded, no growth)" : "NOT MET (grows or over the limit)"}`,
      ].join("\n"),
    );
  } finally {
    await stopServer(child);
  }
}

await main();
