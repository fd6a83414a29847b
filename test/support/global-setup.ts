import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { closeApp, openApp } from "../../src/app.js";
import { dropFileDatabases, writeEmbeddedTemplate } from "./database.js";
import { expectRedis } from "./redis.js";
import { testConfig } from "./service.js";

/**
 * Fails at once when Redis does not answer (the rate-limit tests share counters through it;
 * .ci/prepare starts it). On real PostgreSQL, migrates DATABASE_URL's database once: it is the
 * template each test file clones its own database from. On the embedded database, writes the
 * migrated snapshot every service's in-memory database starts from (see database.ts).
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  await expectRedis();
  const url = process.env.DATABASE_URL;
  if (url === undefined) {
    const dir = await mkdtemp(path.join(tmpdir(), "embedded-template-"));
    const file = path.join(dir, "template.tar");
    await writeEmbeddedTemplate(file);
    project.provide("embeddedTemplateFile", file);
    return () => rm(dir, { recursive: true, force: true });
  }
  await closeApp(await openApp(testConfig()));
  return () => dropFileDatabases(url);
}
