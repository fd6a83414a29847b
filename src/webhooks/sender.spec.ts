import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { post } from "./sender.js";

/*
 * One POST of a delivery (./sender.ts) against a receiver on 127.0.0.1: what it sends, what each
 * answer comes to, and the targets it refuses without ever connecting.
 */

interface Received {
  readonly method: string;
  readonly path: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

let server: http.Server;
let port: number;
let connections = 0;
const received: Received[] = [];
/** How the receiver answers the next requests. */
let answer: (res: http.ServerResponse) => void = (res) => res.end("ok");

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      received.push({ method: req.method!, path: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString() });
      answer(res);
    });
  });
  server.on("connection", () => connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  received.length = 0;
  connections = 0;
  answer = (res) => res.end("ok");
});

/** The default attempt timeout (WEBHOOK_ATTEMPT_TIMEOUT_MS): no answer here takes that long but the one that never comes. */
const timeoutMs = 10_000;
const headers = { "x-webhook-signature": "t=1,v1=ab", "webhook-id": "evt_1", "webhook-timestamp": "1", "webhook-signature": "v1,q83v" };
const body = JSON.stringify({ event_id: "evt_1", type: "payment.succeeded", data: { object: { amount: 1 } } });

describe("post to a sandbox receiver", () => {
  it("POSTs the body as JSON with the signature headers; a 2xx is a success", async () => {
    answer = (res) => {
      res.writeHead(204);
      res.end();
    };
    expect(await post({ url: `http://127.0.0.1:${port}/hooks/in?x=1`, livemode: false }, headers, body, timeoutMs)).toEqual({
      responseStatus: 204,
      error: null,
    });
    expect(received).toHaveLength(1);
    const [request] = received;
    expect(request).toMatchObject({ method: "POST", path: "/hooks/in?x=1", body });
    expect(request!.headers).toMatchObject({
      ...headers,
      "content-type": "application/json",
      "content-length": String(Buffer.byteLength(body)),
      "user-agent": "payment-service-webhooks/1",
    });
  });

  it("goes to localhost by name too", async () => {
    expect(await post({ url: `http://localhost:${port}/`, livemode: false }, headers, body, timeoutMs)).toEqual({
      responseStatus: 200,
      error: null,
    });
  });

  it.each([400, 404, 500, 503])("a %i answer is a failed attempt naming the status", async (status) => {
    answer = (res) => {
      res.writeHead(status);
      res.end("no");
    };
    expect(await post({ url: `http://127.0.0.1:${port}/`, livemode: false }, headers, body, timeoutMs)).toEqual({
      responseStatus: status,
      error: `the receiver answered HTTP ${status}`,
    });
  });

  it("does not follow a redirect: a 302 is a failed attempt and its Location gets nothing", async () => {
    answer = (res) => {
      if (res.req.url === "/moved") {
        res.writeHead(302, { location: `http://127.0.0.1:${port}/elsewhere` });
        res.end();
      } else res.end("ok");
    };
    expect(await post({ url: `http://127.0.0.1:${port}/moved`, livemode: false }, headers, body, timeoutMs)).toEqual({
      responseStatus: 302,
      error: "the receiver answered HTTP 302",
    });
    expect(received.map((r) => r.path)).toEqual(["/moved"]);
  });

  it("reads no more than a little of a huge answer and still counts its 200", async () => {
    const huge = 64 * 1024 * 1024;
    let written = 0;
    answer = (res) => {
      res.on("error", () => {});
      res.writeHead(200, { "content-length": String(huge) });
      const chunk = Buffer.alloc(64 * 1024, "x");
      const more = () => {
        while (written < huge && !res.destroyed) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once("drain", more);
        }
        res.end();
      };
      more();
    };
    expect(await post({ url: `http://127.0.0.1:${port}/`, livemode: false }, headers, body, timeoutMs)).toEqual({
      responseStatus: 200,
      error: null,
    });
    // The sender hung up long before the 64 MB were through (socket buffers hold a few MB at most).
    expect(written).toBeLessThan(huge);
  });

  it("a receiver that hangs up in the middle of a 2xx answer has the event: its status decides", async () => {
    answer = (res) => {
      res.writeHead(200, { "content-length": "100" });
      res.write("partial");
      setTimeout(() => res.socket?.destroy(), 20);
    };
    expect(await post({ url: `http://127.0.0.1:${port}/`, livemode: false }, headers, body, timeoutMs)).toEqual({
      responseStatus: 200,
      error: null,
    });
  });

  it("a closed port is 'connection refused'", async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    expect(await post({ url: `http://127.0.0.1:${closedPort}/`, livemode: false }, headers, body, timeoutMs)).toEqual({
      responseStatus: null,
      error: "connection refused",
    });
  });

  it("a name that does not resolve is 'host not found'", async () => {
    expect(await post({ url: "http://no-such-host.invalid/", livemode: false }, headers, body, timeoutMs)).toEqual({
      responseStatus: null,
      error: "host not found",
    });
  });

  it("an unparsable URL is a failed attempt, not a throw", async () => {
    expect(await post({ url: "not a url", livemode: false }, headers, body, timeoutMs)).toEqual({
      responseStatus: null,
      error: "webhook_url is not a valid URL",
    });
  });

  it("a receiver that never answers: the attempt ends after its timeout as 'no answer', and the connection is closed", async () => {
    let closed = false;
    answer = (res) => res.on("close", () => (closed = true));
    const started = performance.now();
    expect(await post({ url: `http://127.0.0.1:${port}/`, livemode: false }, headers, body, 300)).toEqual({
      responseStatus: null,
      error: "no answer within 0.3 s",
    });
    expect(performance.now() - started).toBeGreaterThanOrEqual(295);
    await vi.waitFor(() => expect(closed).toBe(true));
  });

  it.each(["http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/", "http://[::ffff:169.254.169.254]/", "http://2852039166/"])(
    "never goes to the link-local or metadata address of %s",
    async (url) => {
      const attempt = await post({ url, livemode: false }, headers, body, timeoutMs);
      expect(attempt.responseStatus).toBeNull();
      expect(attempt.error).toContain("link-local or metadata");
    },
  );
});

describe("post of a production event", () => {
  it("refuses http without connecting, even to a receiver that would answer", async () => {
    expect(await post({ url: `http://127.0.0.1:${port}/`, livemode: true }, headers, body, timeoutMs)).toEqual({
      responseStatus: null,
      error: "production events go to https URLs only",
    });
    expect(connections).toBe(0);
    expect(received).toEqual([]);
  });

  it("refuses https to a name that resolves to a loopback address (localhost), without connecting", async () => {
    const attempt = await post({ url: `https://localhost:${port}/`, livemode: true }, headers, body, timeoutMs);
    expect(attempt.responseStatus).toBeNull();
    expect(attempt.error).toContain("not a public address");
    expect(connections).toBe(0);
  });

  it.each([
    "https://10.0.0.1/hook",
    "https://127.0.0.1/hook",
    "https://192.168.0.10/hook",
    "https://[::1]/hook",
    "https://[::ffff:127.0.0.1]/hook",
    "https://[::ffff:10.0.0.1]/hook",
    "https://[fd00::1]/hook",
  ])("refuses the private address literal of %s at once", async (url) => {
    const attempt = await post({ url, livemode: true }, headers, body, timeoutMs);
    expect(attempt).toEqual({ responseStatus: null, error: expect.stringContaining("not a public address") });
  });

  it("refuses a link-local literal as link-local", async () => {
    const attempt = await post({ url: "https://169.254.169.254/", livemode: true }, headers, body, timeoutMs);
    expect(attempt.error).toContain("link-local or metadata");
  });
});
