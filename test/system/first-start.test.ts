import { describe, expect, it } from "vitest";
import { emptyDatabaseUrl, onPostgres } from "../support/database.js";
import { logLines, runNpmScript } from "../support/server-log.js";
import { spawnServer } from "../support/server-process.js";
import { until } from "../support/wait.js";
import { testDataEncryptionKey, testHashSecret } from "../support/service.js";

/*
 * A new user's first start on PostgreSQL (docs/operations.md, "First start"): the embedded database
 * prints a sandbox merchant and key at once (test/system/readme.test.ts runs that); on an empty PostgreSQL
 * database the start log says what to run, and what that prints works as printed.
 */

describe.skipIf(!onPostgres)("the first start on an empty PostgreSQL database", () => {
  it("logs the way in, npm run bootstrap; its printed call answers on the port given; a later start says nothing of it", async () => {
    const databaseUrl = await emptyDatabaseUrl();
    const first = await spawnServer({ DATABASE_URL: databaseUrl });
    let url: string;
    try {
      url = first.url;
      // Logged once the instance listens, after it has looked for a merchant.
      await until("the hint is logged", () => first.output().includes("no merchant in the database yet"), 10_000);
      const hint = logLines(first.output()).find((line) => String(line.message).includes("no merchant in the database yet"));
      expect(hint, first.output()).toMatchObject({ level: "warn" });
      expect(hint!.message).toContain("run `npm run bootstrap`");

      const bootstrap = await runNpmScript("bootstrap", {
        ...process.env,
        DATABASE_URL: databaseUrl,
        API_KEY_HASH_SECRET: testHashSecret,
        DATA_ENCRYPTION_KEY: testDataEncryptionKey,
        PUBLIC_BASE_URL: url,
        LOG_LEVEL: "info",
      });
      expect(bootstrap.code, bootstrap.output).toBe(0);
      expect(bootstrap.output).toMatch(/^ {2}merchant_id {2}mer_\w+$/m);
      const call = /curl -H "api-key: (snd_\w+)" (\S+)$/m.exec(bootstrap.output);
      expect(call, bootstrap.output).not.toBeNull();
      expect(call![2]).toBe(`${url}/health`);
      const answer = await fetch(call![2]!, { headers: { "api-key": call![1]! } });
      expect(answer.status).toBe(200);
    } finally {
      await first.stop();
    }
    const later = await spawnServer({ DATABASE_URL: databaseUrl });
    await later.stop();
    expect(later.output()).not.toContain("no merchant in the database yet");
  }, 120_000);
});
