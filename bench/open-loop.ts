/*
 * Latency at a fixed offered rate: requests sent on a schedule whatever the answers do (an open
 * loop), each timed from when it was due, as wrk2 times them. autocannon's rate is a budget per
 * connection per second, spent back to back at the start of each second: 200 requests/s over two
 * connections were two streams of 100 in the first 150 ms of every second, so any pause of the
 * service held up a stream's every request behind it, which no client sending at that rate would see.
 * Timing from the due moment rather than the send counts a late send against the service too
 * (wrk2's "coordinated omission"), so a stall of the load generator itself is never hidden.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { Pool } from "undici";
import { percentile } from "./service.js";

/** What an open loop measured: the rate it kept, latency percentiles (ms, to a tenth), and failed answers. */
export interface OpenLoopFigures {
  readonly requestsPerSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly errors: number;
}

/**
 * Sends GET `path()` to `url` `rate` times a second for `seconds`, each request on its own schedule
 * over a keep-alive pool that opens a connection whenever every open one is busy, and resolves once
 * every answer is in.
 */
export async function openLoop(
  url: string,
  options: { rate: number; seconds: number; headers: Record<string, string>; path: () => string },
): Promise<OpenLoopFigures> {
  const pool = new Pool(url);
  const intervalMs = 1000 / options.rate;
  const count = Math.round(options.rate * options.seconds);
  const latencies: number[] = [];
  let errors = 0;
  const inFlight: Promise<void>[] = [];
  const start = performance.now();
  try {
    for (let i = 0; i < count; i++) {
      const due = start + i * intervalMs;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      inFlight.push(
        pool.request({ method: "GET", path: options.path(), headers: options.headers }).then(
          async (response) => {
            await response.body.text();
            latencies.push(performance.now() - due);
            if (response.statusCode !== 200) errors++;
          },
          () => {
            latencies.push(performance.now() - due);
            errors++;
          },
        ),
      );
    }
    await Promise.all(inFlight);
  } finally {
    await pool.close();
  }
  const elapsedSeconds = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    requestsPerSecond: Math.round(count / elapsedSeconds),
    p50: Math.round(10 * percentile(latencies, 50)) / 10,
    p99: Math.round(10 * percentile(latencies, 99)) / 10,
    errors,
  };
}
