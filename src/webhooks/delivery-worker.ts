/*
 * The body of the webhook delivery thread (delivery-thread.ts): a dispatcher with database
 * connections and a clock of its own, driven by the host's messages.
 */
import "reflect-metadata";
import { parentPort, workerData } from "node:worker_threads";
import { DataSource } from "typeorm";
import { systemClock } from "../clock.js";
import { poolOptions } from "../db/pool.js";
import { useNamedStatements } from "../db/prepared.js";
import { log } from "../log.js";
import { SandboxTestClock } from "../sandbox/test-clock.js";
import type { DeliveryThreadSettings, FromThread, ToThread } from "./delivery-thread.js";
import { WebhookDispatcher } from "./dispatcher.js";

/** One look for due deliveries and one write of outcomes at a time, and the test clock's refresh. */
const poolSize = 3;

const settings = workerData as DeliveryThreadSettings;
const port = parentPort!;
const dataSource = new DataSource({
  type: "postgres",
  url: settings.databaseUrl,
  logging: false,
  extra: poolOptions(settings.timeouts, poolSize),
});
await dataSource.initialize();
if (settings.namedStatements) useNamedStatements(dataSource);
const testClock = settings.sandboxTestClock ? new SandboxTestClock(dataSource) : undefined;
await testClock?.refresh();
const dispatcher = new WebhookDispatcher(dataSource, testClock ?? systemClock, settings.perEndpoint, () => testClock?.refresh());

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
    await dataSource.destroy();
  } catch (error) {
    log.error("webhook delivery thread did not stop cleanly", { error: String(error) });
  }
  port.postMessage({ type: "stopped" } satisfies FromThread);
  process.exit(0);
}

dispatcher.start();
port.postMessage({ type: "ready" } satisfies FromThread);
