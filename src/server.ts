import cluster from "node:cluster";
import { pathToFileURL } from "node:url";
import { closeApp, openApp, serve, type RunningService } from "./app.js";
import { loadConfig } from "./config.js";
import { createProbePages } from "./health/probes.js";
import { log } from "./log.js";
import { clusterMetrics, reportToPrimary } from "./metrics/cluster-metrics.js";
import { openOpsListener } from "./transport/ops-listener.js";
import { signalExitCode, StopSignals } from "./stop-signals.js";
import { MerchantRow } from "./merchants/merchant.entity.js";
import { bootstrapSandbox, describeSandboxStart } from "./sandbox-merchant.js";

/**
 * Starts the service from the environment. On an empty embedded database it first creates a sandbox
 * merchant and prints its key, so a new user can call the API straight away; on an empty PostgreSQL
 * database it says how to make one.
 */
export async function main(): Promise<RunningService> {
  const loaded = loadConfig();
  // A worker of a cluster leaves OPS_PORT to the primary, which scrapes it over IPC (cluster-metrics.ts).
  const config = cluster.isWorker ? { ...loaded, opsPort: undefined } : loaded;
  const app = await openApp(config);
  if (cluster.isWorker) reportToPrimary(app.metrics.registry);
  const service = await serve(app);
  // Handled from the moment it listens: until then a signal ends the process at once, unlogged.
  new StopSignals(Date.now, {
    async stop(signal) {
      // SIGTERM comes from an orchestrator or a load balancer's peer, which must see the instance
      // unready before it goes; SIGINT from someone at a terminal, who wants it gone now.
      const drainDelayMs = signal === "SIGTERM" ? config.shutdownDelayMs : 0;
      log.info("stopping", { signal, drain_delay_ms: drainDelayMs, grace_ms: config.shutdownGraceMs });
      await service.close({ drainDelayMs, graceMs: config.shutdownGraceMs });
      await closeApp(app);
      log.info("stopped", { signal });
      process.exit(0);
    },
    force: forceExit,
  }).listen();
  log.info("listening", {
    url: service.url,
    ops_url: service.opsUrl,
    database: config.databaseUrl === undefined ? `embedded (${config.dataDir})` : "postgresql",
  });
  if ((await app.dataSource.getRepository(MerchantRow).count()) === 0) {
    if (app.embedded !== undefined) process.stdout.write(describeSandboxStart(await bootstrapSandbox(app), service.url));
    // On PostgreSQL a key printed here would land in a deployment's shared logs, and every instance
    // starting at once would make a merchant: the operator runs the bootstrap once instead.
    else log.warn(noMerchantYet);
  }
  return service;
}

/** What a first start on an empty PostgreSQL database says, so a new user knows the way in. */
const noMerchantYet =
  "no merchant in the database yet: run `npm run bootstrap` (in the image: node dist/src/cli/bootstrap.js) with this instance's environment; it creates a sandbox merchant, its profile and a secret key, and prints them";

/** A worker that lived this long was healthy: its exit does not count towards the backoff. */
const healthyLifetimeMs = 30_000;
/** Delay before re-forking after quick exits: doubling from the first, up to the most. */
const refork = { firstMs: 1_000, maxMs: 30_000 };

/**
 * Runs WORKERS copies of the service sharing the port, one per core: each is an ordinary stateless
 * instance (own pool, own job runner), exactly as several machines behind a load balancer would be.
 * The embedded database belongs to one process, so several workers need DATABASE_URL.
 */
async function supervise(workers: number, opsPort: number | undefined): Promise<void> {
  const ops = opsPort === undefined ? undefined : await openOpsListener(opsPort, clusterMetrics(), createProbePages(undefined));
  if (ops !== undefined) log.info("ops listening", { url: ops.url, workers });
  const startedAt = new Map<number, number>();
  const fork = () => {
    const worker = cluster.fork();
    startedAt.set(worker.id, Date.now());
  };
  for (let i = 0; i < workers; i++) fork();
  let stopping = false;
  // Workers that die soon after starting (a database that refuses them, a bad release) are started
  // again less and less often, rather than in a tight loop that floods the log and the database.
  let quickExits = 0;
  cluster.on("exit", (worker, code) => {
    if (stopping) return;
    const lived = Date.now() - (startedAt.get(worker.id) ?? 0);
    startedAt.delete(worker.id);
    quickExits = lived < healthyLifetimeMs ? quickExits + 1 : 0;
    const delayMs = quickExits === 0 ? 0 : Math.min(refork.firstMs * 2 ** (quickExits - 1), refork.maxMs);
    log.error("worker exited; starting another", { pid: worker.process.pid, code, delay_ms: delayMs });
    setTimeout(() => {
      if (!stopping) fork();
    }, delayMs);
  });
  new StopSignals(Date.now, {
    stop(signal) {
      stopping = true;
      for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill(signal);
      // The workers' exits end the primary, once its own port is closed too.
      void ops?.close();
    },
    force(signal) {
      for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill("SIGKILL");
      forceExit(signal);
    },
  }).listen();
}

/** Ends the process at once on a signal that came while a graceful stop was under way, saying so. */
function forceExit(signal: NodeJS.Signals): void {
  log.warn("stopping at once: another signal came during the graceful stop; calls in flight are cut", { signal });
  process.exit(signalExitCode(signal));
}

/**
 * Starts the service as configured: WORKERS processes under a supervisor, or this one. Called when
 * this module is run directly and by `npm start` (start.mjs), which imports the build.
 */
export function run(): void {
  const fail = (error: unknown) => {
    log.error("start failed", { error: error instanceof Error ? error.message : String(error) });
    process.exit(1);
  };
  try {
    const { workers, databaseUrl, opsPort } = loadConfig();
    if (workers > 1 && databaseUrl === undefined) throw new Error("WORKERS > 1 needs DATABASE_URL: the embedded database has one owner");
    if (workers > 1 && cluster.isPrimary) supervise(workers, opsPort).catch(fail);
    else main().catch(fail);
  } catch (error) {
    fail(error);
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) run();
