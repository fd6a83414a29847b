import { closeApp, openApp } from "../app.js";
import { loadConfig } from "../config.js";
import { log } from "../log.js";
import { bootstrapSandbox, describeSandboxStart } from "../sandbox-merchant.js";

/*
 * `npm run bootstrap`: creates a sandbox merchant, profile and secret key in the configured database
 * (DATABASE_URL, or the embedded one — stop the server first, as the embedded database has one owner).
 */
try {
  const config = loadConfig();
  const app = await openApp(config);
  try {
    process.stdout.write(describeSandboxStart(await bootstrapSandbox(app), app.publicBaseUrl));
  } finally {
    await closeApp(app);
  }
} catch (error) {
  log.error("bootstrap failed", { error: error instanceof Error ? error.message : String(error) });
  process.exitCode = 1;
}
