import { execFile, spawn } from "node:child_process";
import path from "node:path";
import { describe, it } from "vitest";
import type { JsonBody } from "../support/clients.js";
import { newMerchant } from "../support/merchant.js";
import { runningService } from "../support/running.js";
import { type CallResult, type ClientFamily, errorDetailOf, runClientScenario } from "./scenario.js";

/*
 * The service called as an operator calls it: `buf curl` over gRPC with HTTP/2 prior knowledge and
 * no local schema, every message described by the service's own reflection.
 */

const service = runningService();

const bufBinary = path.resolve(import.meta.dirname, "../../node_modules/.bin/buf");

/** The arguments of one `buf curl` of `method` with `request` and `headers`. */
function curlArgs(method: string, request: JsonBody, headers: Record<string, string>): string[] {
  return [
    "curl",
    "--protocol",
    "grpc",
    "--http2-prior-knowledge",
    ...Object.entries(headers).flatMap(([name, value]) => ["-H", `${name}: ${value}`]),
    "-d",
    JSON.stringify(request),
    `${service.url}/${method}`,
  ];
}

/** What buf curl prints when reflection does not list the method asked for. */
const noSuchMethod = "contains no such method";

/** buf curl, one process per call. */
const bufCurl: ClientFamily = {
  unknownMethodRefusal: noSuchMethod,

  call(method, request, headers) {
    return new Promise<CallResult>((resolve, reject) => {
      execFile(bufBinary, curlArgs(method, request, headers), { timeout: 30_000 }, (error, stdout, stderr) => {
        if (error === null) {
          // buf curl shows no response headers unless verbose: `replayed` is unknown here.
          resolve({ ok: true, message: JSON.parse(stdout), replayed: undefined });
          return;
        }
        // An RPC error is printed to stderr as Connect's error JSON, its details as {type, value, debug}.
        if (stderr.includes(noSuchMethod)) {
          resolve({ ok: false, code: noSuchMethod, message: stderr.trim(), detail: undefined });
          return;
        }
        const start = stderr.indexOf("{");
        if (start < 0) {
          reject(new Error(`buf curl failed: ${stderr}`));
          return;
        }
        const printed = JSON.parse(stderr.slice(start)) as JsonBody;
        resolve({ ok: false, code: printed.code, message: printed.message, detail: errorDetailOf(printed.details) });
      });
    });
  },

  firstOfStream(method, request, headers) {
    // A stream that follows events never ends: the process is stopped once the first message is out.
    const child = spawn(bufBinary, curlArgs(method, request, headers), { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill();
        reject(new Error(`no message within 20 s: ${stderr}`));
      }, 20_000);
      child.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      child.stdout.on("data", (chunk: Buffer) => {
        stdout += chunk.toString();
        // Each message is printed as indented JSON whose closing brace starts a line.
        const end = stdout.indexOf("\n}");
        if (end >= 0) {
          clearTimeout(timer);
          child.kill();
          resolve(JSON.parse(stdout.slice(0, end + 2)));
        }
      });
      child.on("exit", () => {
        clearTimeout(timer);
        reject(new Error(`buf curl ended without a message: ${stderr}`));
      });
    });
  },
};

describe("buf curl (gRPC, reflection, no local schema)", () => {
  it("runs the client scenario", { timeout: 120_000 }, async () => {
    await runClientScenario(bufCurl, await newMerchant(service.url));
  });
});
