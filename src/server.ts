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
    process.stdout.write(describeSandboxStart(start, `http://localhost:${config.port}`));
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

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    log.error("start failed", { error: error instanceof Error ? error.message : String(error) });
    process.exit(1);
  });
}
