/*
 * The body of the webhook delivery thread (delivery-thread.ts): a dispatcher with database
 * connections and a clock of its own, driven by the host's messages. Its connections are a plain pg
 * pool: TypeORM, which it has no use for, would take a third of the thread's start.
 */
import { parentPort, workerData } from "node:worker_threads";
import pg from "pg";
import { systemClock } from "../clock.js";
import { poolOptions } from "../db/pool.js";
import { log } from "../log.js";
import { SandboxTestClock } from "../test-clock.js";
import type { DeliveryThreadSettings, FromThread, ToThread } from "./delivery-thread.js";
import { WebhookDispatcher } from "./dispatcher.js";

/** One look for due deliveries and one write of outcomes at a time, and the test clock's refresh. */
const poolSize = 3;

const settings = workerData as DeliveryThreadSettings;
const port = parentPort!;
const pool = new pg.Pool(poolOptions(settings.databaseUrl, settings.timeouts, poolSize));
// An idle connection that breaks (PostgreSQL restarting) is replaced by the pool; unheard, its error would end the thread.
pool.on("error", (error) => log.warn("a webhook delivery connection to PostgreSQL failed", { error: String(error) }));
const testClock = settings.sandboxTestClock ? new SandboxTestClock(pool) : undefined;
await testClock?.refresh();
const dispatcher = new WebhookDispatcher(pool, testClock ?? systemClock, settings, () => testClock?.refresh());

port.on("message", (message: ToThread) => {
  if (message.type === "deliver-due") {
    dispatcher.deliverDue().then(
      (sent) => port.postMessage({ type: "delivered", id: message.id, sent } satisfies FromThread),
      (error: unknown) => port.postMessage({ type: "failed", id: message.id, error: String(error) } satisfies FromThread),
    );
  } else if (message.type === "adopt") {
    dispatcher.adopt(message.deliveries, message.lease);
  } else if (message.type === "abandon") {
    dispatcher.abandon(message.lease);
  } else {
    void stop();
  }
});

async function stop(): Promise<void> {
  try {
    await dispatcher.stop();
    await pool.end();
  } catch (error) {
    log.error("webhook delivery thread did not stop cleanly", { error: String(error) });
  }
  port.postMessage({ type: "stopped" } satisfies FromThread);
  process.exit(0);
}

dispatcher.start();
port.postMessage({ type: "ready" } satisfies FromThread);
