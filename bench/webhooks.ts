/*
 * The webhook scenario of `npm run bench`: create-with-confirm payments over REST for one merchant
 * whose profile has no webhook_url and for one whose profile sends every event to a local receiver,
 * interleaved, so the cost of delivery shows as the difference; and the delay from each event's
 * creation (just before its commit) to its arrival at the receiver.
 */
import { once } from "node:events";
import { Worker } from "node:worker_threads";
import autocannon from "autocannon";
import { countOf, percentile } from "./service.js";

/** One round of the scenario for one merchant. */
export interface WebhookRound {
  readonly webhooks: boolean;
  readonly paymentsPerSecond: number;
  readonly p99: number;
  readonly errors: number;
}

/** What the receiver saw over all rounds with webhooks. */
export interface DeliveryFigures {
  readonly delivered: number;
  readonly duplicates: number;
  readonly delayP50: number;
  readonly delayP99: number;
  readonly delayMax: number;
  /** How long after the last round the last event of the merchant with webhooks arrived. */
  readonly drainMs: number;
}

/** What the receiver has seen so far. */
interface Received {
  readonly delays: number[];
  readonly seen: number;
  readonly duplicates: number;
  readonly lastArrival: number;
}

/** A local webhook receiver: where a profile's webhook_url points, and what it has seen. */
export interface Receiver {
  readonly url: string;
  received(): Promise<Received>;
  close(): Promise<void>;
}

/**
 * The receiver's code, run in a worker thread so that its event loop never waits on autocannon's.
 * It stands for a merchant's server, which runs on another machine: here it takes its CPU from the
 * two cores that serve the payments, so it is as small as an HTTP/1.1 server can be (a
 * `node:http` server with `JSON.parse` cost twice as much per event: docs/performance.md, "Webhooks:
 * each thread's CPU per payment"). It reads each request by its Content-Length, as the service
 * sends them, answers 204 at once, and records how long each event took to arrive.
 */
const receiverCode = `
const net = require("node:net");
const { parentPort } = require("node:worker_threads");
const delays = [];
const seen = new Set();
let duplicates = 0;
let lastArrival = 0;
const answer = "HTTP/1.1 204 No Content\\r\\n\\r\\n";
/** The string value of the body's first "<name>" member: event_id and created come before the event's data. */
function stringAfter(body, name) {
  const from = body.indexOf('"' + name + '":"') + name.length + 4;
  return body.slice(from, body.indexOf('"', from));
}
const server = net.createServer((socket) => {
  // One character per byte, so that Content-Length counts characters.
  socket.setEncoding("latin1");
  socket.setNoDelay(true);
  let unread = "";
  socket.on("data", (chunk) => {
    unread += chunk;
    let answers = "";
    for (;;) {
      const headEnd = unread.indexOf("\\r\\n\\r\\n");
      if (headEnd < 0) break;
      const head = unread.slice(0, headEnd).toLowerCase();
      const lengthAt = head.indexOf("\\r\\ncontent-length:") + 17;
      const lineEnd = head.indexOf("\\r\\n", lengthAt);
      const length = Number(head.slice(lengthAt, lineEnd < 0 ? head.length : lineEnd));
      if (unread.length < headEnd + 4 + length) break;
      const body = unread.slice(headEnd + 4, headEnd + 4 + length);
      unread = unread.slice(headEnd + 4 + length);
      const now = Date.now();
      const id = stringAfter(body, "event_id");
      if (seen.has(id)) duplicates++;
      seen.add(id);
      delays.push(now - Date.parse(stringAfter(body, "created")));
      lastArrival = now;
      answers += answer;
    }
    if (answers !== "") socket.write(answers);
  });
  // A connection the service drops (it stops, or an attempt timed out) ends here: what it delivered is counted.
  socket.on("error", () => {});
});
server.listen(0, "127.0.0.1", () => parentPort.postMessage({ port: server.address().port }));
parentPort.on("message", (message) => {
  if (message === "report") parentPort.postMessage({ delays, seen: seen.size, duplicates, lastArrival });
  else server.close(() => parentPort.close());
});`;

/** Starts a receiver that answers every event 204 at once, in a worker thread so no load generator delays it. */
export async function startReceiver(): Promise<Receiver> {
  const worker = new Worker(receiverCode, { eval: true });
  const [{ port }] = (await once(worker, "message")) as [{ port: number }];
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    async received() {
      worker.postMessage("report");
      return ((await once(worker, "message")) as [Received])[0];
    },
    async close() {
      worker.postMessage("close");
      await once(worker, "exit");
    },
  };
}

/** A merchant with a sandbox key, its profile's webhook_url set to `webhookUrl` when given. */
type NewMerchant = (webhookUrl: string | undefined) => Promise<{ apiKey: string; profileId: string }>;

/**
 * Runs `rounds` rounds of create-with-confirm for `seconds` each, without then with webhooks, and
 * waits (up to a minute) for every event of the merchant with webhooks to arrive.
 */
export async function measureWebhooks(
  url: string,
  newMerchant: NewMerchant,
  payment: (profileId: string) => unknown,
  options: { connections: number; seconds: number; rounds: number },
): Promise<{ rounds: WebhookRound[]; delivery: DeliveryFigures }> {
  const receiver = await startReceiver();
  try {
    const without = await newMerchant(undefined);
    const withHooks = await newMerchant(receiver.url);
    const rounds: WebhookRound[] = [];
    for (let round = 0; round < options.rounds; round++) {
      for (const [webhooks, merchant] of [
        [false, without],
        [true, withHooks],
      ] as const) {
        const result = await autocannon({
          url,
          connections: options.connections,
          duration: options.seconds,
          requests: [
            {
              method: "POST",
              path: "/payments",
              headers: { "content-type": "application/json", "api-key": merchant.apiKey },
              body: JSON.stringify(payment(merchant.profileId)),
            },
          ],
        });
        const measured = {
          webhooks,
          paymentsPerSecond: Math.round(result.requests.total / options.seconds),
          p99: result.latency.p99,
          errors: result.errors + result.non2xx,
        };
        rounds.push(measured);
        console.log(JSON.stringify({ scenario: "webhooks", round: round + 1, ...measured }));
      }
    }
    const loadEnded = Date.now();
    const expected = await countOf(url, withHooks.apiKey, "/events/list");
    let received = await receiver.received();
    while (received.seen < expected && Date.now() - loadEnded < 60_000) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      received = await receiver.received();
    }
    const sorted = [...received.delays].sort((a, b) => a - b);
    return {
      rounds,
      delivery: {
        delivered: received.seen,
        duplicates: received.duplicates,
        delayP50: percentile(sorted, 50),
        delayP99: percentile(sorted, 99),
        delayMax: sorted.at(-1) ?? 0,
        drainMs: Math.max(0, received.lastArrival - loadEnded),
      },
    };
  } finally {
    await receiver.close();
  }
}
