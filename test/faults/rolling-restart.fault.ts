import { afterAll, describe, expect, it } from "vitest";
import { visaCard as card } from "../support/cards.js";
import { rest } from "../support/clients.js";
import { fileDatabaseUrl } from "../support/database.js";
import { type LoadBalancer, startLoadBalancer } from "../support/load-balancer.js";
import { newMerchant, type TestMerchant } from "../support/merchant.js";
import { freePort } from "../support/ports.js";
import { type ServerProcess, spawnServer } from "../support/server-process.js";

/*
 * A rolling restart as a deploy does it (docs/operations.md, "Signals and shutdown"): two instances
 * behind HAProxy under steady load, each in turn sent SIGTERM, waited for, and started again on its
 * port. Every call of the clients must succeed: the stopping instance turns unready and keeps serving
 * until HAProxy's checks have taken it out of the rotation, then finishes what it has in flight, so
 * no client sees a 5xx or a connection cut mid-call.
 */

/** HAProxy checks every second and takes an instance out after 3 failed checks: the delay must outlast that. */
const drainDelayMs = 4_500;

const servers = new Map<number, ServerProcess>();
let balancer: LoadBalancer | undefined;
afterAll(async () => {
  await balancer?.close();
  await Promise.all([...servers.values()].map((server) => server.kill()));
});

async function startOnPort(databaseUrl: string, port: number): Promise<void> {
  servers.set(
    port,
    await spawnServer({
      DATABASE_URL: databaseUrl,
      PORT: String(port),
      SHUTDOWN_DELAY_MS: String(drainDelayMs),
      SHUTDOWN_GRACE_MS: "10000",
      DATABASE_POOL_SIZE: "8",
    }),
  );
}

async function until(condition: () => Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`not ${what} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe("a rolling restart of two instances behind HAProxy under load", () => {
  it("fails no call: no 5xx, no connection cut", { timeout: 300_000 }, async () => {
    const databaseUrl = (await fileDatabaseUrl())!;
    const ports = [await freePort(), await freePort()];
    for (const port of ports) await startOnPort(databaseUrl, port);
    balancer = await startLoadBalancer(ports.map((port) => `http://127.0.0.1:${port}`));
    const lb = balancer;
    const merchant: TestMerchant = await newMerchant(lb.url);

    let loading = true;
    let calls = 0;
    const failures: string[] = [];
    const client = async (n: number) => {
      for (let i = 0; loading; i++) {
        calls++;
        try {
          const res = await rest(lb.url, "POST", "/payments", {
            apiKey: merchant.apiKey,
            headers: { "idempotency-key": `roll-${n}-${i}` },
            body: { amount: 1000, currency: "USD", profile_id: merchant.profileId, confirm: true, payment_method_data: { card } },
          });
          if (res.status !== 200) failures.push(`${res.status} ${JSON.stringify(res.body)}`);
        } catch (error) {
          failures.push(`no answer: ${String((error as Error).cause ?? error)}`);
        }
      }
    };
    const clients = Array.from({ length: 8 }, (_, n) => client(n));

    const restartMs: number[] = [];
    for (const port of ports) {
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      const started = performance.now();
      await servers.get(port)!.stop();
      await startOnPort(databaseUrl, port);
      await until(async () => (await lb.serversUp()) === ports.length, "back in HAProxy's rotation");
      restartMs.push(performance.now() - started);
    }
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    loading = false;
    await Promise.all(clients);

    console.log(
      `rolling restart: ${calls} calls over ${ports.length} restarts (each ${restartMs.map((ms) => `${(ms / 1000).toFixed(1)} s`).join(", ")} ` +
        `from SIGTERM to back in rotation), ${failures.length} failed`,
    );
    expect(failures).toEqual([]);
    expect(calls).toBeGreaterThan(100);
  });
});
