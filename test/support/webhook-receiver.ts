import { createHmac, timingSafeEqual } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach } from "vitest";
import type { EventDelivery } from "../../gen/paymentservice/v1/event_pb.js";
import { DeliveryStatusSchema } from "../../gen/paymentservice/v1/event_pb.js";
import { iso, type Json, word } from "./resource-api.js";
import { freePort } from "./ports.js";

/*
 * The other side of a webhook: a small HTTP server on 127.0.0.1 (an ephemeral port) that records
 * every request it gets and answers as the test scripts it, and the receiver-side check of our
 * X-Webhook-Signature header the way docs/events.md describes it.
 */

/** One request a receiver got, whole. */
export interface ReceivedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

/** How the receiver answers one request. */
export type Answer =
  /** An answer with this status (and headers and body), after `delayMs` when given. */
  | { readonly status: number; readonly headers?: Record<string, string>; readonly body?: string; readonly delayMs?: number }
  /** No answer at all: the request stays open until released, the sender gives up or the receiver closes. */
  | { readonly hold: true }
  /** 200 and then `bytes` bytes of body, written as fast as the sender reads them. */
  | { readonly stream: number };

/** Chooses the answer to the `index`th request (0 first). */
export type Script = (request: ReceivedRequest, index: number) => Answer;

export interface WebhookReceiver {
  /** The URL to set as webhook_url: http://127.0.0.1:<port>/hook. */
  readonly url: string;
  /** Every request received so far, in arrival order (recorded once its body is complete). */
  readonly requests: readonly ReceivedRequest[];
  /** Answers the next requests by `script` instead. */
  answerWith(script: Script): void;
  /** How many requests are held open now. */
  held(): number;
  /** Answers every held request with `status`. */
  release(status?: number): void;
  close(): Promise<void>;
}

/** Answers 200 to everything. */
export const alwaysOk: Script = () => ({ status: 200, body: "ok" });

/** Answers `status` to the first `n` requests and 200 to the rest. */
export const failFirst =
  (n: number, status = 500): Script =>
  (_request, index) =>
    index < n ? { status, body: "not now" } : { status: 200, body: "ok" };

/** Starts a receiver answering by `script` (200 to everything by default). */
export async function startReceiver(script: Script = alwaysOk): Promise<WebhookReceiver> {
  const requests: ReceivedRequest[] = [];
  const holding = new Set<http.ServerResponse>();
  let current = script;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const request: ReceivedRequest = {
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      };
      requests.push(request);
      const answer = current(request, requests.length - 1);
      if ("hold" in answer) {
        holding.add(res);
        res.on("close", () => holding.delete(res));
      } else if ("stream" in answer) {
        void stream(res, answer.stream);
      } else {
        const send = () => {
          if (res.destroyed) return;
          res.writeHead(answer.status, { "content-type": "text/plain", ...answer.headers });
          res.end(answer.body ?? "");
        };
        if (answer.delayMs === undefined) send();
        else setTimeout(send, answer.delayMs);
      }
    });
  });
  // A sender that hangs up mid-answer is not the receiver's problem.
  server.on("clientError", (_error, socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/hook`,
    requests,
    answerWith(next) {
      current = next;
    },
    held: () => holding.size,
    release(status = 200) {
      for (const res of holding) {
        res.writeHead(status);
        res.end("ok");
      }
      holding.clear();
    },
    async close() {
      for (const res of holding) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Writes 200 and `bytes` bytes of body, with backpressure, until done or the sender hangs up. */
async function stream(res: http.ServerResponse, bytes: number): Promise<void> {
  res.on("error", () => {});
  res.writeHead(200, { "content-type": "application/octet-stream", "content-length": String(bytes) });
  const chunk = Buffer.alloc(64 * 1024, "x");
  let written = 0;
  while (written < bytes && !res.destroyed) {
    const part = chunk.subarray(0, Math.min(chunk.length, bytes - written));
    written += part.length;
    if (!res.write(part)) {
      // Whichever comes, the other's listener goes too: one per wait would pile up on a long body.
      await new Promise<void>((resolve) => {
        const done = () => {
          res.off("drain", done);
          res.off("close", done);
          resolve();
        };
        res.once("drain", done);
        res.once("close", done);
      });
    }
  }
  if (!res.destroyed) res.end();
}

/** A URL on 127.0.0.1 where nothing listens: a port that was free a moment ago. */
export async function closedPortUrl(): Promise<string> {
  return `http://127.0.0.1:${await freePort()}/hook`;
}

/** The parts of an X-Webhook-Signature header: `t` and every `v1`. */
export function parseSignatureHeader(header: string): { t: number; v1: string[] } {
  const parts = header.split(",").map((part) => part.split("=", 2) as [string, string]);
  const t = parts.filter(([key]) => key === "t");
  if (t.length !== 1) throw new Error(`not one t= in ${header}`);
  return { t: Number(t[0]![1]), v1: parts.filter(([key]) => key === "v1").map(([, value]) => value) };
}

/**
 * The receiver-side check docs/events.md describes: HMAC-SHA256 keyed with the webhook secret (its
 * UTF-8 bytes, "whsec_" included) over "<t>.<raw body>", hex, equal to one of the v1 values, and t
 * within `toleranceSeconds` of now. True when the header verifies with `secret`.
 */
export function verifySignature(header: string, body: string, secret: string, toleranceSeconds = 300): boolean {
  const { t, v1 } = parseSignatureHeader(header);
  if (!Number.isInteger(t) || Math.abs(Date.now() / 1000 - t) > toleranceSeconds) return false;
  const expected = Buffer.from(createHmac("sha256", secret).update(`${t}.${body}`).digest("hex"));
  return v1.some((candidate) => candidate.length === expected.length && timingSafeEqual(Buffer.from(candidate), expected));
}

/** The headers a Standard Webhooks library takes, from a received request. */
export function standardHeaders(request: ReceivedRequest): Record<string, string> {
  const pick = (name: string) => String(request.headers[name] ?? "");
  return {
    "webhook-id": pick("webhook-id"),
    "webhook-timestamp": pick("webhook-timestamp"),
    "webhook-signature": pick("webhook-signature"),
  };
}

/** An event's delivery block from an RPC answer, under the REST field names (null when absent). */
export function deliveryAsRest(d: EventDelivery | undefined): Json | null {
  if (d === undefined) return null;
  return {
    status: word(DeliveryStatusSchema, "DELIVERY_STATUS_", d.status),
    attempts: d.attempts,
    last_response_status: d.lastResponseStatus ?? null,
    last_error: d.lastError ?? null,
    last_attempt_at: iso(d.lastAttemptAt),
    next_attempt_at: iso(d.nextAttemptAt),
  };
}

/** The delivery block of an event whose profile had no webhook_url when it was written. */
export const noWebhookUrl: Json = {
  status: "no_webhook_url",
  attempts: 0,
  last_response_status: null,
  last_error: null,
  last_attempt_at: null,
  next_attempt_at: null,
};

/**
 * A `startReceiver` for the calling file's tests whose receivers are closed after the test that
 * started them, so a delivery an earlier test left pending fails fast (connection refused) when a
 * later test moves the clock. Called at a file's top level: it registers the file's afterEach.
 */
export function receiversPerTest(): (script?: Script) => Promise<WebhookReceiver> {
  const started: WebhookReceiver[] = [];
  afterEach(async () => {
    await Promise.all(started.splice(0).map((receiver) => receiver.close()));
  });
  return async (script = alwaysOk) => {
    const receiver = await startReceiver(script);
    started.push(receiver);
    return receiver;
  };
}
