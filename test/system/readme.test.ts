import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../support/ports.js";
import { type ServerProcess, spawnServer } from "../support/server-process.js";
import { until } from "../support/wait.js";

/*
 * The README's "Try it" section, run as a reader runs it: every shell block in order, in one bash,
 * against a real server process on a fresh embedded database. Only what a reader fills in is
 * replaced: the key, merchant and profile the start-up printed, and the ports (8080, and 4242 for
 * the webhook receiver), since other test files run at the same time. Both event streams, which
 * a reader stops with Ctrl-C, are stopped after a few seconds.
 */

const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
/** The admin key the README's tour starts the service with. */
const tourAdminKey = "my-admin-api-key";

/**
 * The shell blocks from "## Try it" up to the next top-level section, but two that set up the
 * reader's machine rather than call the service: the line that starts it (the test starts it), and
 * the Debian packages for Python clients (tests install nothing; the Python client test compiles
 * the protos with that protoc).
 */
function tryItBlocks(): string[] {
  const from = readme.indexOf("\n## Try it\n");
  const to = readme.indexOf("\n## ", from + 1);
  const section = readme.slice(from, to);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)]
    .map((match) => match[1]!)
    .filter((block) => !block.includes("npm start") && !block.includes("apt-get"));
}

/** The value printed beside `name` in the start-up's sandbox merchant block. */
function printed(output: string, name: string): string {
  const value = new RegExp(`^\\s+${name}\\s+(\\S+)$`, "m").exec(output)?.[1];
  if (value === undefined) throw new Error(`the start-up output has no ${name}:\n${output}`);
  return value;
}

describe("README: Try it", () => {
  let server: ServerProcess;

  beforeAll(async () => {
    server = await spawnServer({ DATA_DIR: ":memory:", ADMIN_API_KEY: tourAdminKey, SANDBOX_TEST_CLOCK: "true" });
    await until("the start-up's sandbox merchant", () => server.output().includes("api_key"), 5_000);
  });

  afterAll(async () => {
    await server?.stop();
  });

  it("runs top to bottom as written, each answer the one its comment describes", async () => {
    const port = new URL(server.url).port;
    const receiverPort = await freePort();
    const startup = server.output();
    const script = tryItBlocks()
      .join("\n")
      .replace("export KEY=snd_…", `export KEY=${printed(startup, "api_key")}`)
      .replace("export MER=mer_… PRO=pro_…", `export MER=${printed(startup, "merchant_id")} PRO=${printed(startup, "profile_id")}`)
      .replaceAll(/(localhost|127\.0\.0\.1):8080/g, `127.0.0.1:${port}`)
      .replaceAll(":4242/", `:${receiverPort}/`)
      .replace(".listen(4242)", `.listen(${receiverPort})`);
    expect(script).toContain(`.listen(${receiverPort})`);
    // A stream runs until the reader stops it: stopped here after a few seconds, which counts as done.
    const streamsStopped = `npx() { case "$*" in *StreamEvents*) timeout 8 npx "$@" || [ $? -eq 124 ] ;; *) command npx "$@" ;; esac; }\n`;
    const { stdout, stderr } = await promisify(execFile)("bash", ["-c", `set -u\n${streamsStopped}${script}`], {
      cwd: new URL("../..", import.meta.url),
      env: { ...process.env, NO_COLOR: "1" },
      maxBuffer: 64 * 2 ** 20,
      timeout: 240_000,
    });
    const output = `${stdout}\n${stderr}`;
    // The three errors the tour shows on purpose (no key, a charge under a revoked mandate, a deleted
    // object), and no other.
    const errors = [...stdout.matchAll(/"error":\{"type":"[a-z_]+","code":"(\w+)"/g)].map((match) => match[1]);
    expect(errors).toEqual(["IR_01", "IR_16", "HE_02"]);
    // buf curl reports a failed call on stderr; the only ones are the two streams, stopped.
    expect([...stderr.matchAll(/"code":\s*"(\w+)"/g)].map((match) => match[1])).toEqual(["canceled", "canceled"]);
    // `field` prints undefined for a field the answer lacks: none is shown, and an id read that way
    // would have made the next call's 404 one of the errors above.
    expect(output).not.toMatch(/^undefined$/m);
    expect(stdout).toMatch(/"status":"requires_capture"/);
    expect(stdout).toMatch(/"amount_received":2000/);
    expect(stdout).toMatch(/"status":"won"/);
    expect(stdout).toMatch(/"status":"accepted"/);
    expect(stdout).toMatch(/"deleted":true/);
    // The payment made with the saved card, which shows it.
    expect(stdout).toMatch(/"status":"succeeded"[^\n]*"payment_method_id":"pm_\w+"/);
    // The subscription: the setup's mandate, two charges made under it, and its revocation.
    expect(stdout).toMatch(/"status":"succeeded","amount":0,[^\n]*"mandate_id":"man_\w+"/);
    expect(stdout.match(/"description":"Plan, month \d"[^\n]*"off_session":true/g)).toHaveLength(2);
    expect(stdout).toMatch(/"status":"revoked"/);
    // The receiver verified the payment's event and its redelivery (curl's answers end without a
    // newline, so the receiver's line may follow one on the same line).
    expect(stdout.match(/payment\.succeeded verified$/gm)).toHaveLength(2);
    expect(stdout).not.toContain("NOT VERIFIED");
    // buf curl: the gRPC dispute accepted, and the stream resumed after the gRPC payment's first event.
    expect(stdout).toContain("DISPUTE_STATUS_ACCEPTED");
    expect(stdout).toMatch(/"type": "dispute\.accepted"/);
  }, 300_000);
});
