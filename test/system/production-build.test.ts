import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { visaCard as card } from "../support/cards.js";
import { newMerchant } from "../support/merchant.js";
import { createPayment } from "../support/payments.js";
import { eachLine, listeningUrl } from "../support/server-log.js";
import { adminApiKey, testDataEncryptionKey, testHashSecret } from "../support/service.js";

/*
 * `npm start` as an operator runs it (docs/operations.md): it builds dist/ when the build is missing
 * or stale, runs the compiled service with plain node, and a SIGTERM sent to npm reaches the server,
 * which stops and exits, rather than npm exiting and leaving the server serving.
 */

const repositoryRoot = fileURLToPath(new URL("../../", import.meta.url));

interface Started {
  readonly npm: ChildProcess;
  readonly url: string;
  output(): string;
}

/** Starts `npm start`; `ownGroup` puts npm and the server in a process group of their own, as a terminal's foreground job. */
async function npmStart(ownGroup = false): Promise<Started> {
  const npm = spawn("npm", ["start"], {
    cwd: repositoryRoot,
    detached: ownGroup,
    env: {
      ...process.env,
      DATABASE_URL: "",
      DATA_DIR: ":memory:",
      PORT: "0",
      LOG_LEVEL: "info",
      ADMIN_API_KEY: adminApiKey,
      API_KEY_HASH_SECRET: testHashSecret,
      DATA_ENCRYPTION_KEY: testDataEncryptionKey,
      SHUTDOWN_DELAY_MS: "0",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const url = await new Promise<string>((resolve, reject) => {
    for (const stream of [npm.stdout!, npm.stderr!]) {
      eachLine(stream, (line) => {
        output += `${line}\n`;
        const found = listeningUrl(line);
        if (found !== undefined) resolve(found);
      });
    }
    npm.once("exit", (code, signal) => reject(new Error(`npm start exited (${code ?? signal}) before listening:\n${output}`)));
  });
  return { npm, url, output: () => output };
}

/**
 * Sends SIGTERM to npm itself, as a container runtime or an operator would, and waits for npm to
 * exit. npm forwards the signal to the script and, once it has ended, ends itself by the same signal.
 */
/** Whether the server logged that it stopped on `signal` (the `stopped` line, whatever its fields' order). */
function stoppedBy(output: string, signal: "SIGTERM" | "SIGINT"): boolean {
  return output.split("\n").some((line) => line.includes('"message":"stopped"') && line.includes(`"signal":"${signal}"`));
}

async function terminate({ npm }: Started): Promise<void> {
  const exited = once(npm, "exit");
  npm.kill("SIGTERM");
  await exited;
}

describe("npm start", () => {
  it("builds dist/ when it is stale, serves from the build, and stops on a SIGTERM sent to npm; a second start reuses the build", async () => {
    rmSync(`${repositoryRoot}dist/.built`, { force: true });
    const first = await npmStart();
    try {
      expect(first.output()).toContain("building dist/");
      expect((await fetch(`${first.url}/readyz`)).status).toBe(200);
      const merchant = await newMerchant(first.url);
      const payment = await createPayment(first.url, merchant, { amount: 1000, confirm: true, payment_method_data: { card } });
      expect(payment.status).toBe("succeeded");
    } finally {
      await terminate(first);
    }
    expect(stoppedBy(first.output(), "SIGTERM")).toBe(true);
    await expect(fetch(`${first.url}/livez`)).rejects.toThrow();

    const second = await npmStart();
    try {
      expect(second.output()).not.toContain("building dist/");
      expect((await fetch(`${second.url}/livez`)).status).toBe(200);
    } finally {
      await terminate(second);
    }
    expect(stoppedBy(second.output(), "SIGTERM")).toBe(true);
    await expect(fetch(`${second.url}/livez`)).rejects.toThrow();
    // A build compiles the whole service: minutes on a busy two-core machine.
  }, 240_000);

  it("stops cleanly on one Ctrl-C, which a terminal sends to npm and the server alike (and npm forwards again)", async () => {
    for (let attempt = 0; attempt < 3; attempt++) {
      const started = await npmStart(true);
      const exited = once(started.npm, "exit");
      process.kill(-started.npm.pid!, "SIGINT");
      await exited;
      expect(stoppedBy(started.output(), "SIGINT"), started.output()).toBe(true);
      expect(started.output()).not.toContain("stopping at once");
    }
  }, 120_000);
});
