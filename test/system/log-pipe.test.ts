import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { eachLine, listeningUrl } from "../support/server-log.js";
import { serverProgram } from "../support/server-process.js";
import { adminApiKey, testDataEncryptionKey, testHashSecret } from "../support/service.js";

/*
 * The log is the service's stdout (docs/architecture.md). When whatever reads it goes away, the pipe
 * closes and every later line fails to be written (EPIPE): the service must keep answering, dropping
 * lines, not die on the first one.
 */

const repositoryRoot = fileURLToPath(new URL("../../", import.meta.url));

describe("the log pipe", () => {
  it("closing the service's stdout does not stop it: later requests are still answered", { timeout: 60_000 }, async () => {
    const child = spawn(process.execPath, [serverProgram], {
      cwd: repositoryRoot,
      env: {
        ...process.env,
        DATABASE_URL: "",
        DATA_DIR: ":memory:",
        PORT: "0",
        LOG_LEVEL: "info",
        SHUTDOWN_DELAY_MS: "0",
        ADMIN_API_KEY: adminApiKey,
        API_KEY_HASH_SECRET: testHashSecret,
        DATA_ENCRYPTION_KEY: testDataEncryptionKey,
      },
      stdio: ["ignore", "pipe", "inherit"],
    });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        eachLine(child.stdout!, (line) => {
          const found = listeningUrl(line);
          if (found !== undefined) resolve(found);
        });
        child.once("exit", (code) => reject(new Error(`the server exited (${code}) before listening`)));
      });
      child.stdout!.destroy();
      for (let i = 0; i < 5; i++) {
        // Each request writes a log line into the closed pipe.
        const res = await fetch(`${url}/merchants`, {
          method: "POST",
          headers: { "content-type": "application/json", "admin-api-key": adminApiKey },
          body: "{}",
        });
        expect(res.status).toBe(200);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(child.exitCode).toBeNull();
    } finally {
      const exited = once(child, "exit");
      child.kill("SIGTERM");
      await exited;
    }
  });
});
