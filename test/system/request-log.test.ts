import { spawn } from "node:child_process";
import { once } from "node:events";
import net from "node:net";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LogLine, logLines } from "../support/server-log.js";
import { rest } from "../support/clients.js";
import { newMerchant, type TestMerchant } from "../support/merchant.js";
import { serverProcessDatabase } from "../support/database.js";
import { spawnServer, type ServerProcess } from "../support/server-process.js";
import { startInstance } from "../support/service.js";

/*
 * Issue 19 item 6: one structured line per call, with what an operator needs to find it (request
 * id, procedure, protocol, HTTP status and code, merchant and key, pid, duration), the request id
 * the client chose when it is a sane token (and echoed to it), lines for requests refused before
 * any interceptor ran, and LOG_LEVEL honoured.
 */

const repositoryRoot = fileURLToPath(new URL("../../", import.meta.url));

describe("the request log line", () => {
  let server: ServerProcess;
  let merchant: TestMerchant;
  let lines: LogLine[];
  /** The line of the request whose answer carried `requestId`, once the server has stopped. */
  const lineOf = (requestId: string) => lines.find((line) => line.request_id === requestId);

  beforeAll(async () => {
    server = await spawnServer(await serverProcessDatabase());
    merchant = await newMerchant(server.url);
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
  });

  const sent: Record<string, string> = {};

  it("keeps a client's X-Request-Id when it is a short safe token, and echoes it", async () => {
    const res = await rest(server.url, "GET", "/health", { apiKey: merchant.apiKey, headers: { "x-request-id": "client-trace.42:a_b" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-request-id")).toBe("client-trace.42:a_b");
    sent.accepted = "client-trace.42:a_b";
  });

  it.each([
    ["with a space", "has space"],
    ["over 128 characters", "x".repeat(129)],
    ["with markup", "<script>"],
    ["that is a card number", "4242-4242-4242-4242"],
  ])("replaces one %s by an id of its own", async (_, requestId) => {
    const res = await rest(server.url, "GET", "/health", { apiKey: merchant.apiKey, headers: { "x-request-id": requestId } });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-request-id")).toMatch(/^req_\w+$/);
  });

  it("is written for bodies that do not decode, over REST and Connect, and for requests HTTP itself refuses", async () => {
    const restBody = await rest(server.url, "POST", "/customers", { apiKey: merchant.apiKey, rawBody: "{not json" });
    expect(restBody.body.error.code).toBe("IR_06");
    sent.restBody = restBody.headers.get("x-request-id")!;
    const connectBody = await fetch(`${server.url}/paymentservice.v1.CustomerService/CreateCustomer`, {
      method: "POST",
      headers: { "content-type": "application/json", "api-key": merchant.apiKey },
      body: "{not json",
    });
    expect(connectBody.status).toBe(400);
    sent.connectBody = connectBody.headers.get("x-request-id")!;

    // A request line Node's parser refuses never reaches a handler; it is answered, logged and counted all the same.
    const { port } = new URL(server.url);
    const socket = net.connect(Number(port), "127.0.0.1");
    socket.end("GET /\u0001 HTTP/1.1\r\nHost: x\r\n\r\n");
    let answer = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      answer += chunk;
    });
    await once(socket, "close");
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    sent.parser = /\r\nx-request-id: (\S+)\r\n/.exec(answer)?.[1] ?? "";
    expect(sent.parser).toMatch(/^req_/);
  });

  it("names the call, its outcome, the merchant and key, the pid and the duration", async () => {
    await server.stop();
    lines = logLines(server.output());
    const pids = new Set(lines.map((line) => line.pid));
    expect(pids.size).toBe(1);
    expect([...pids][0]).toEqual(expect.any(Number));

    expect(lineOf(sent.accepted!)).toEqual({
      level: "info",
      time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      pid: expect.any(Number),
      message: "request",
      request_id: "client-trace.42:a_b",
      protocol: "rest",
      method: "GET",
      procedure: "/paymentservice.v1.HealthService/Check",
      status: 200,
      merchant_id: merchant.merchantId,
      key_id: merchant.keyId,
      ms: expect.any(Number),
    });
    expect(lineOf(sent.restBody!)).toMatchObject({
      protocol: "rest",
      procedure: "/paymentservice.v1.CustomerService/CreateCustomer",
      status: 400,
      code: "IR_06",
      merchant_id: merchant.merchantId,
      key_id: merchant.keyId,
    });
    expect(lineOf(sent.connectBody!)).toMatchObject({
      protocol: "connect",
      procedure: "/paymentservice.v1.CustomerService/CreateCustomer",
      status: 400,
      code: "IR_06",
      merchant_id: merchant.merchantId,
    });
    expect(lineOf(sent.parser!)).toMatchObject({ message: "request", protocol: "rest", status: 400, code: "IR_06" });
  });
});

describe("a failure of ours", () => {
  it("quotes the client's request id in the HE_00 message it answers", async () => {
    // One instance whatever TEST_TOPOLOGY says: its own database is taken away, and healthy ones would answer instead.
    const broken = await startInstance();
    const { apiKey } = await newMerchant(broken.url);
    // The database goes away under the running service: every call now fails on our side.
    await broken.app.dataSource.destroy();
    try {
      const res = await rest(broken.url, "POST", "/customers", {
        apiKey,
        body: { name: "Jane" },
        headers: { "x-request-id": "order-7781" },
      });
      expect(res.status).toBe(500);
      expect(res.headers.get("x-request-id")).toBe("order-7781");
      expect(res.body.error).toMatchObject({ code: "HE_00", message: expect.stringContaining("(request order-7781)") });
    } finally {
      await broken.close().catch(() => undefined);
    }
  }, 60_000);
});

describe("LOG_LEVEL", () => {
  /** The messages a process logging one line at each level prints under `level`. */
  async function printedAt(level: string): Promise<unknown[]> {
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "--input-type=module",
        "-e",
        `import { log } from "./src/log.ts"; log.debug("d"); log.info("i"); log.warn("w"); log.error("e");`,
      ],
      { cwd: repositoryRoot, env: { ...process.env, LOG_LEVEL: level }, stdio: ["ignore", "pipe", "inherit"] },
    );
    let output = "";
    child.stdout!.setEncoding("utf8");
    child.stdout!.on("data", (chunk: string) => {
      output += chunk;
    });
    await once(child, "exit");
    return logLines(output).map((line) => line.message);
  }

  it("keeps the lines of its level and the more severe ones", async () => {
    expect(await printedAt("debug")).toEqual(["d", "i", "w", "e"]);
    expect(await printedAt("info")).toEqual(["i", "w", "e"]);
    expect(await printedAt("warn")).toEqual(["w", "e"]);
    expect(await printedAt("error")).toEqual(["e"]);
    expect(await printedAt("silent")).toEqual([]);
  }, 60_000);

  it("stops the start with a message naming the values when it is none of them", async () => {
    await expect(spawnServer({ DATA_DIR: ":memory:", LOG_LEVEL: "verbose" })).rejects.toThrow(
      /LOG_LEVEL must be one of silent, error, warn, info, debug, got \\?"verbose\\?"/,
    );
  }, 60_000);
});
