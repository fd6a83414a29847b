import { closeApp, openApp, serve, type App } from "../../src/app.js";
import { loadConfig, type Config } from "../../src/config.js";
import type { Clock } from "../../src/clock.js";

/** The operator key every test service accepts. */
export const adminApiKey = "test-admin-key";

/**
 * Configuration for a test service: an ephemeral port, real PostgreSQL when DATABASE_URL is set and
 * a private in-memory embedded database otherwise.
 */
export function testConfig(overrides: NodeJS.ProcessEnv = {}): Config {
  return loadConfig({
    DATA_DIR: ":memory:",
    API_KEY_HASH_SECRET: "test-hash-secret",
    DATABASE_POOL_SIZE: "10",
    ...process.env,
    PORT: "0",
    ADMIN_API_KEY: adminApiKey,
    ...overrides,
  });
}

/** A service started for a test file, on a real port. */
export interface TestService {
  readonly url: string;
  readonly app: App;
  close(): Promise<void>;
}

/** Starts the real service (database, migrations, port) as `npm start` does. */
export async function startService(overrides: NodeJS.ProcessEnv = {}, clock?: Clock): Promise<TestService> {
  const app = await openApp(testConfig(overrides), clock);
  const running = await serve(app);
  return {
    url: running.url,
    app,
    async close() {
      await running.close();
      await closeApp(app);
    },
  };
}
