import { setTimeout as sleep } from "node:timers/promises";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { databaseClient } from "../../src/db/pool.js";
import { fileDatabaseUrl } from "../support/database.js";
import { newMerchant, type TestMerchant } from "../support/merchant.js";
import { programEnv, spawnServer, type ServerProcess } from "../support/server-process.js";
import { drainLimitMs, MoneyOracle } from "./oracle.js";

/*
 * The kill -9 oracle (issue 18, item 1). Two real server processes share the file's database while
 * the money oracle's client loops (oracle.ts) create, confirm, capture, refund and pay out with
 * idempotency keys, and a harness SIGKILLs one instance every few seconds and starts a new one on
 * another port. A request that fails with a connection error, a 5xx or IK_01 (its key is still held by
 * a request that was running) is sent again with the same key to whichever instance is up, until a
 * definitive answer. Once the killing stops, the jobs the run left must drain within 30 s, and then
 * the database, the API and the sandbox's books must agree with every acknowledgement, and `npm run
 * ledger:verify` must find every balance equal to its recomputation. The oracle counts violations
 * rather than stopping at the first, so one run says everything that went wrong; it must find none.
 */

/** How long clients run while instances are killed: KILL_ORACLE_SECONDS, 60 by default. */
const runMs = Number(process.env.KILL_ORACLE_SECONDS ?? "60") * 1000;
const clientLoops = 16;
const merchantCount = 4;
/** Kills come at a random moment in this range after the previous one (and once both instances are up). */
const killGapMs = [2000, 5000] as const;

const instanceEnv = (databaseUrl: string): NodeJS.ProcessEnv => ({
  DATABASE_URL: databaseUrl,
  DATABASE_POOL_SIZE: "8",
  JOB_POLL_MS: "200",
  SCHEDULED_REFUND_DELAY_SECONDS: "3",
  RATE_LIMIT_PER_MINUTE: "1000000",
  REDIS_URL: "",
});

/** What the killer counted; the clients' counts are the oracle's. */
const harness = { kills: 0, restarts: 0 };
/** How long each restarted instance took to listen. */
const restartMs: number[] = [];

/** The two instance slots; undefined while one is being restarted. */
const slots: (ServerProcess | undefined)[] = [undefined, undefined];
const everStarted: ServerProcess[] = [];

function upInstances(): ServerProcess[] {
  return slots.filter((s): s is ServerProcess => s !== undefined);
}

/**
 * Kills one of the two instances at random (SIGKILL) every few seconds while the run lasts, once the
 * other is up, and starts a new one in its slot on a new port. Resolves when the run ends, with the
 * restarts still under way.
 */
async function killer(databaseUrl: string, deadline: number): Promise<Promise<void>> {
  const running = () => Date.now() < deadline;
  const restarts: Promise<void>[] = [];
  while (running()) {
    await sleep(Math.min(killGapMs[0] + Math.random() * (killGapMs[1] - killGapMs[0]), deadline - Date.now()));
    if (!running()) break;
    // The clients' retry goes to the other instance, so it must be up: a restart takes seconds on a busy machine.
    while (running() && slots.includes(undefined)) await sleep(50);
    if (!running()) break;
    const slot = Math.floor(Math.random() * slots.length);
    const victim = slots[slot]!;
    slots[slot] = undefined;
    await victim.kill();
    harness.kills++;
    restarts.push(
      (async () => {
        const startedAt = Date.now();
        const fresh = await spawnServer(instanceEnv(databaseUrl));
        everStarted.push(fresh);
        harness.restarts++;
        restartMs.push(Date.now() - startedAt);
        slots[slot] = fresh;
      })(),
    );
  }
  return Promise.all(restarts).then(() => undefined);
}

describe("the kill -9 oracle: two instances, SIGKILL every few seconds, clients retrying with their keys", () => {
  let db: pg.Client;
  let databaseUrl: string;

  beforeAll(async () => {
    databaseUrl = (await fileDatabaseUrl())!;
    db = databaseClient(databaseUrl);
    await db.connect();
  });
  afterAll(async () => {
    await Promise.all(everStarted.map((server) => server.kill()));
    await db?.end();
  });

  it("every acknowledgement holds, one object per key, refunds within captures, no payout paid twice, events match, the backlog drains in 30 s, the ledger verifies", async () => {
    const started = await Promise.all(slots.map(() => spawnServer(instanceEnv(databaseUrl))));
    everStarted.push(...started);
    started.forEach((server, i) => {
      slots[i] = server;
    });
    const merchants: TestMerchant[] = [];
    for (let i = 0; i < merchantCount; i++) merchants.push(await newMerchant(started[0]!.url));
    const oracle = new MoneyOracle({ instances: upInstances, merchants, db, ledgerEnv: programEnv(instanceEnv(databaseUrl)) });

    // The run: clients and the killer until the deadline; clients finish the request in hand.
    const runStarted = Date.now();
    const deadline = runStarted + runMs;
    oracle.start(clientLoops, () => Date.now() < deadline);
    const restarting = await killer(databaseUrl, deadline);
    // The drain is timed from the end of the run: the killing stopped and no client starts another request.
    const drained = await oracle.drain(deadline);
    await restarting;
    const verdict = await oracle.check(drained);

    console.log(
      JSON.stringify(
        {
          run_s: (deadline - runStarted) / 1000,
          restart_s: {
            mean: restartMs.reduce((a, b) => a + b, 0) / Math.max(1, restartMs.length) / 1000,
            max: Math.max(0, ...restartMs) / 1000,
          },
          ...harness,
          ...oracle.report(drained, verdict),
        },
        null,
        2,
      ),
    );
    expect(verdict.violations.slice(0, 50)).toEqual([]);
    expect(drained.ms).toBeLessThanOrEqual(drainLimitMs);
    expect(harness.kills).toBeGreaterThan(0);
  });
});
