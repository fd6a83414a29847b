import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runNpmScript } from "../support/server-log.js";
import { closeApp, openApp, serve } from "../../src/app.js";
import { migrations } from "../../src/migrations/index.js";
import { migrate } from "../../src/cli/migrate.js";
import { visaCard as card } from "../support/cards.js";
import { emptyDatabaseUrl, onPostgres } from "../support/database.js";
import { newMerchant } from "../support/merchant.js";
import { createPayment } from "../support/payments.js";
import { spawnServer } from "../support/server-process.js";
import { testConfig } from "../support/service.js";

/*
 * Migrations as a deploy runs them (docs/operations.md, "Migrations"): `npm run migrate` once, then
 * instances started with MIGRATE_ON_START=false, which refuse a database that lacks a migration
 * rather than serve on a schema they were not written for. On PostgreSQL the deploy job and the
 * server are separate processes on one database; the embedded database has one owner, so there the
 * same steps run one after the other in this process.
 */

const migrationCount = migrations.length;

/** The lines a `npm run migrate` process logged, and how it exited. */
interface MigrateRun {
  readonly code: number | null;
  readonly output: string;
  /** How many migrations its `migrated` line says it applied. */
  readonly applied: number | undefined;
}

/** Runs `npm run migrate` as a deploy job would, against `databaseUrl`. */
async function npmRunMigrate(databaseUrl: string): Promise<MigrateRun> {
  const { code, output } = await runNpmScript("migrate", { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: "info" });
  // Found by its message wherever the logger puts the fields of the line.
  const migrated = output.split("\n").find((line) => line.includes('"message":"migrated"'));
  const count = migrated === undefined ? undefined : /"count":(\d+)/.exec(migrated)?.[1];
  return { code, output, applied: count === undefined ? undefined : Number(count) };
}

const refusal = new RegExp(
  `MIGRATE_ON_START is false and the database lacks ${migrationCount} migration\\(s\\) this release needs \\(Foundation1763800000000, .*\\): run \`npm run migrate\``,
);

describe.skipIf(!onPostgres)("npm run migrate, then MIGRATE_ON_START=false (PostgreSQL: separate processes)", () => {
  it("a server refuses a fresh database; two deploy jobs at once apply each migration once; then the server serves", async () => {
    const databaseUrl = await emptyDatabaseUrl();

    const refused = await spawnServer({ DATABASE_URL: databaseUrl, MIGRATE_ON_START: "false" }).then(
      () => "",
      (error: Error) => error.message,
    );
    expect(refused).toMatch(/^the server exited \(1\) before listening:/);
    expect(
      refused.split("\n").some((line) => line.includes('"message":"start failed"') && refusal.test(line)),
      refused,
    ).toBe(true);

    // The advisory lock: two jobs started together, one applies everything, the other finds nothing left.
    const jobs = await Promise.all([npmRunMigrate(databaseUrl), npmRunMigrate(databaseUrl)]);
    for (const job of jobs) expect(job.code, job.output).toBe(0);
    expect(jobs.map((job) => job.applied).sort()).toEqual([0, migrationCount]);

    const again = await npmRunMigrate(databaseUrl);
    expect(again.code, again.output).toBe(0);
    expect(again.applied).toBe(0);

    const server = await spawnServer({ DATABASE_URL: databaseUrl, MIGRATE_ON_START: "false" });
    try {
      expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
      const merchant = await newMerchant(server.url);
      const payment = await createPayment(server.url, merchant, { amount: 1000, confirm: true, payment_method_data: { card } });
      expect(payment.status).toBe("succeeded");
    } finally {
      await server.stop();
    }
  }, 180_000);
});

describe("migrate(), then MIGRATE_ON_START=false (embedded database: one process)", () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "migrate-test-"));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));
  const env = { DATABASE_URL: "", DATA_DIR: dataDir };

  it("refuses a fresh database, naming the migrations and the command", async () => {
    await expect(openApp(testConfig({ ...env, MIGRATE_ON_START: "false" }))).rejects.toThrow(refusal);
    // The first start of an embedded database creates its files: tens of seconds on a busy machine.
  }, 120_000);

  it("applies every migration once, and none on a second run", async () => {
    expect(await migrate(testConfig(env))).toEqual(migrations.map((Migration) => new Migration().name));
    expect(await migrate(testConfig(env))).toEqual([]);
  }, 120_000);

  it("then starts and is ready without migrating", async () => {
    const app = await openApp(testConfig({ ...env, MIGRATE_ON_START: "false" }));
    const running = await serve(app);
    try {
      expect((await fetch(`${running.url}/readyz`)).status).toBe(200);
    } finally {
      await running.close();
      await closeApp(app);
    }
  }, 120_000);
});
