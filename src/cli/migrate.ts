import { pathToFileURL } from "node:url";
import { loadConfig, type Config } from "../config.js";
import { applyMigrations } from "../db/data-source.js";
import { startEmbeddedDatabase } from "../db/embedded.js";
import { log } from "../log.js";
import { migrations } from "../migrations/index.js";

/*
 * `npm run migrate` (in a build: `node dist/src/cli/migrate.js`): applies pending migrations once and
 * exits, so a deploy job can migrate before instances started with MIGRATE_ON_START=false take over.
 */

/**
 * Applies the pending migrations to the configured database (DATABASE_URL, else the embedded one
 * under DATA_DIR, which must not be open in a running server) and returns their names.
 */
export async function migrate(config: Config): Promise<string[]> {
  // Room for the migrations' two connections (applyMigrations).
  const embedded = config.databaseUrl === undefined ? await startEmbeddedDatabase(config.dataDir, 2) : undefined;
  try {
    return await applyMigrations(config.databaseUrl ?? embedded!.url, config.databaseConnectTimeoutMs, migrations);
  } finally {
    await embedded?.close();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    const applied = await migrate(loadConfig(process.env, { sharedSecrets: false }));
    log.info("migrated", { applied, count: applied.length });
  } catch (error) {
    log.error("migrate failed", { error: error instanceof Error ? error.message : String(error) });
    process.exitCode = 1;
  }
}
