import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { closeApp, openApp } from "../../src/app.js";
import { buildIfStale } from "../../src/build.mjs";
import { dropFileDatabases, writeEmbeddedTemplate } from "./database.js";
import { expectRedis } from "./redis.js";
import { testConfig } from "./service.js";

/** What the run's first setup prepared: the embedded template's directory (undefined on PostgreSQL), and how to clean up. */
interface Prepared {
  readonly templateDir: string | undefined;
  readonly cleanUp: () => Promise<void>;
}

/**
 * Vitest runs this setup once for the root and once for each tier (vitest.config.ts), all in its
 * main process: the first call prepares, the others share what it prepared, and the first teardown
 * (which comes after every tier's tests) cleans up.
 */
const run = globalThis as { paymentTestsPrepared?: Promise<Prepared> };

async function prepare(): Promise<Prepared> {
  await expectRedis();
  buildIfStale();
  const url = process.env.DATABASE_URL;
  if (url === undefined) {
    const templateDir = await mkdtemp(path.join(tmpdir(), "embedded-template-"));
    await writeEmbeddedTemplate(templateDir);
    return { templateDir, cleanUp: () => rm(templateDir, { recursive: true, force: true }) };
  }
  await closeApp(await openApp(testConfig()));
  return { templateDir: undefined, cleanUp: () => dropFileDatabases(url) };
}

/**
 * Fails at once when Redis does not answer (the rate-limit tests share counters through it;
 * .ci/prepare starts it). Builds dist/ when stale, once, before any worker starts a server process
 * from it (server-process.ts). On real PostgreSQL, migrates DATABASE_URL's database once: it is the
 * template each test file clones its own database from. On the embedded database, writes the
 * migrated template every service's in-memory database and every server process's DATA_DIR starts
 * from (see database.ts).
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  run.paymentTestsPrepared ??= prepare();
  const prepared = await run.paymentTestsPrepared;
  if (prepared.templateDir !== undefined) project.provide("embeddedTemplateDir", prepared.templateDir);
  return async () => {
    const first = run.paymentTestsPrepared;
    run.paymentTestsPrepared = undefined;
    if (first !== undefined) await (await first).cleanUp();
  };
}
