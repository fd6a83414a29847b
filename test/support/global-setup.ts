import { closeApp, openApp } from "../../src/app.js";
import { testConfig } from "./service.js";

/**
 * On real PostgreSQL, migrate once before the test files start, so parallel files never race to
 * create the schema (the embedded database is per file and migrates itself).
 */
export default async function setup(): Promise<void> {
  if (process.env.DATABASE_URL === undefined) return;
  await closeApp(await openApp(testConfig()));
}
