import cluster from "node:cluster";
import { pathToFileURL } from "node:url";
import { closeApp, openApp, serve, type RunningService } from "./app.js";
import { loadConfig } from "./config.js";
import { log } from "./log.js";
import { MerchantRow } from "./merchants/merchant.entity.js";
import { bootstrapSandbox, describeSandboxStart } from "./merchants/bootstrap.js";

/**
 * Starts the service from the environment. On an empty embedded database it first creates a sandbox
 * merchant and prints its key, so a new user can call the API straight away.
 */
export async function main(): Promise<RunningService> {
  const config = loadConfig();
  const app = await openApp(config);
  const service = await serve(app);
  log.info("listening", { url: service.url, database: config.databaseUrl === undefined ? `embedded (${config.dataDir})` : "postgresql" });
  if (app.embedded !== undefined && (await app.dataSource.getRepository(MerchantRow).count()) === 0) {
    const start = await bootstrapSandbox(app);
    process.stdout.write(describeSandboxStart(start, service.url));
  }
  const stop = async (signal: string) => {
    log.info("stopping", { signal });
    await service.close();
    await closeApp(app);
    process.exit(0);
  };
  process.once("SIGINT", () => void stop("SIGINT"));
  process.once("SIGTERM", () => void stop("SIGTERM"));
  return service;
}

/**
 * Runs WORKERS copies of the service sharing the port, one per core: each is an ordinary stateless
 * instance (own pool, own job runner), exactly as several machines behind a load balancer would be.
 * The embedded database belongs to one process, so several workers need DATABASE_URL.
 */
function supervise(workers: number): void {
  for (let i = 0; i < workers; i++) cluster.fork();
  let stopping = false;
  cluster.on("exit", (worker, code) => {
    if (stopping) return;
    log.error("worker exited; starting another", { pid: worker.process.pid, code });
    cluster.fork();
  });
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      stopping = true;
      for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill(signal);
    });
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const fail = (error: unknown) => {
    log.error("start failed", { error: error instanceof Error ? error.message : String(error) });
    process.exit(1);
  };
  try {
    const { workers, databaseUrl } = loadConfig();
    if (workers > 1 && databaseUrl === undefined) throw new Error("WORKERS > 1 needs DATABASE_URL: the embedded database has one owner");
    if (workers > 1 && cluster.isPrimary) supervise(workers);
    else main().catch(fail);
  } catch (error) {
    fail(error);
  }
}
