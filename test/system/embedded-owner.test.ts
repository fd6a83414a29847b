import { existsSync, mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { rest } from "../support/clients.js";
import { newMerchant } from "../support/merchant.js";
import { logLines, runNpmScript } from "../support/server-log.js";
import { serverProgram, spawnServer } from "../support/server-process.js";

/*
 * The embedded database has one owner (docs/operations.md, "The embedded database"): a second
 * process on the same DATA_DIR would keep a copy of its own, and the last to write would erase the
 * other's data. So it refuses to start, naming the directory and the holder; and the lock a killed
 * process leaves behind does not stand in the next start's way.
 */

const dataDir = realpathSync(mkdtempSync(path.join(tmpdir(), "embedded-owner-")));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

/** The one error line of a process refused because `pid` holds the directory. */
function expectRefusedFor(output: string, pid: number): void {
  const errors = logLines(output).filter((line) => line.level === "error");
  expect(errors, output).toHaveLength(1);
  expect(errors[0]!.error).toMatch(
    new RegExp(
      `^DATA_DIR ${dataDir} is in use by process ${pid} \\(node ${serverProgram.replace(".", "\\.")}, since .*\\): the embedded database has one owner`,
    ),
  );
}

describe("two processes on one embedded database", () => {
  it("the second refuses to start, as do bootstrap, migrate and rotate-secrets; after a kill -9 the next start takes over", async () => {
    const first = await spawnServer({ DATA_DIR: dataDir });
    let customerId: string;
    let apiKey: string;
    try {
      const merchant = await newMerchant(first.url);
      apiKey = merchant.apiKey;
      const customer = await rest(first.url, "POST", "/customers", { apiKey, body: { name: "Kept" } });
      expect(customer.status).toBe(200);
      customerId = customer.body.customer_id;

      const second = await spawnServer({ DATA_DIR: dataDir }).then(
        () => "",
        (error: Error) => error.message,
      );
      expect(second).toMatch(/^the server exited \(1\) before listening:/);
      expectRefusedFor(second, first.pid);

      const env = { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: "info", DATABASE_URL: "" };
      for (const script of ["bootstrap", "migrate", "rotate-secrets"]) {
        const run = await runNpmScript(script, env);
        expect(run.code, `${script}: ${run.output}`).toBe(1);
        expectRefusedFor(run.output, first.pid);
      }
      expect(first.running()).toBe(true);
    } finally {
      await first.kill();
    }
    // The killed server's lock is still there: the next start finds its holder gone and takes it.
    expect(existsSync(path.join(dataDir, "owner.lock"))).toBe(true);
    const next = await spawnServer({ DATA_DIR: dataDir });
    try {
      const kept = await rest(next.url, "GET", `/customers/${customerId}`, { apiKey });
      expect(kept.status, JSON.stringify(kept.body)).toBe(200);
      expect(kept.body.name).toBe("Kept");
    } finally {
      await next.stop();
    }
    expect(existsSync(path.join(dataDir, "owner.lock"))).toBe(false);
  }, 120_000);
});
