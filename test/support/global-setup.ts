import { closeApp, openApp } from "../../src/app.js";
import { dropFileDatabases } from "./database.js";
import { expectRedis } from "./redis.js";
import { testConfig } from "./service.js";

/**
 * Fails at once when Redis does not answer (the rate-limit tests share counters through it;
 * .ci/prepare starts it). On real PostgreSQL, migrates DATABASE_URL's database once: it is the
 * template each test file clones its own database from (see database.ts). The embedded database is
 * per file and migrates itself.
 */
export default async function setup(): Promise<(() => Promise<void>) | void> {
  await expectRedis();
  const url = process.env.DATABASE_URL;
  if (url === undefined) return;
  await closeApp(await openApp(testConfig()));
  return () => dropFileDatabases(url);
}
