import { setTimeout as sleep } from "node:timers/promises";
import { Code } from "@connectrpc/connect";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EventService, type Event } from "../gen/paymentservice/v1/event_pb.js";
import { cardData } from "./support/cards.js";
import { rest, rpcClient, type JsonBody, type RpcProtocol } from "./support/clients.js";
import { fileDatabaseUrl, onPostgres } from "./support/database.js";
import { expectRpcError } from "./support/errors.js";
import { issueKey, newMerchant, type TestMerchant } from "./support/merchant.js";
import { expectError, iso, uniqueId } from "./support/resource-api.js";
import { createPayment } from "./support/payments.js";
import { runningService } from "./support/running.js";
import { spawnServer, type ServerProcess } from "./support/server-process.js";
import { waitUntil } from "./support/wait.js";

/*
 * EventService.StreamEvents (proto/paymentservice/v1/event.proto, docs/events.md): every event of
 * the caller's merchant and environment after after_event_id (or from now), oldest first, then each
 * new one as it commits. The stream's order is the reverse of /events/list, so each scenario
 * compares what a consumer received, event by event, with the list read over REST once the writers
 * are done: no event missing, none twice, none out of order.
 *
 * The services run with their job runners polling (instant refunds settle on their own) and the
 * system clock. On PostgreSQL a second instance shares the file's database, so concurrent writers
 * land on both; the embedded database has one owner, so there every writer uses the one instance.
 * Out-of-order commits held open on purpose and SIGKILLed servers exist only on real PostgreSQL.
 */

const protocols = ["connect", "grpc", "grpc-web"] as const satisfies readonly RpcProtocol[];

const service = runningService();

/** On PostgreSQL, a second instance on the same database: racing writers land on both. */
const second = onPostgres ? runningService() : undefined;
/** The instance the i-th of many concurrent writers calls. */
const writer = (i: number) => (second !== undefined && i % 2 === 1 ? second : service);

const visa = "4242424242424242";

/** A succeeded card payment; returns it. */
async function paidPayment(url: string, merchant: TestMerchant, amount = 5000): Promise<JsonBody> {
  const payment = await createPayment(url, merchant, {
    amount,
    confirm: true,
    payment_method: "card",
    payment_method_data: cardData(visa, new Date()),
  });
  expect(payment.status).toBe("succeeded");
  return payment;
}

/** Creates an instant refund (refund.pending now, refund.succeeded from the job runner); returns it as created. */
async function createRefund(url: string, merchant: TestMerchant, paymentId: string, amount: number): Promise<JsonBody> {
  const res = await rest(url, "POST", "/refunds", { apiKey: merchant.apiKey, body: { payment_id: paymentId, amount } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

/** Waits until the job runner has settled the refund; returns it. */
async function settledRefund(url: string, merchant: TestMerchant, refundId: string): Promise<JsonBody> {
  return waitUntil(
    async () => {
      await sleep(50);
      return (await rest(url, "GET", `/refunds/${refundId}`, { apiKey: merchant.apiKey })).body as JsonBody;
    },
    (refund) => refund.status !== "pending",
    1200,
  );
}

/**
 * Waits until every refund of the merchant that wrote refund.pending also wrote its outcome (the job
 * runner settles instant refunds), so that no more events are on their way; returns the events then.
 */
async function settledEvents(url: string, apiKey: string): Promise<JsonBody[]> {
  const settled = await waitUntil(
    async () => {
      await sleep(100);
      return readList(url, apiKey);
    },
    (events) => {
      if (events === undefined) return false;
      const count = (type: string) => events.filter((e) => e.type === type).length;
      return count("refund.pending") === count("refund.succeeded") + count("refund.failed");
    },
    600,
  );
  return settled!;
}

/**
 * Every event of the key's merchant and environment, oldest first: the pages of /events/list (newest
 * first), reversed. Undefined when the pages do not add up to one consistent list (events were
 * written while it was read).
 */
async function readList(url: string, apiKey: string): Promise<JsonBody[] | undefined> {
  const newestFirst: JsonBody[] = [];
  let total: number | undefined;
  for (let offset = 0; ; offset += 100) {
    const res = await rest(url, "POST", "/events/list", { apiKey, body: { limit: 100, offset } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    if (total !== undefined && res.body.total_count !== total) return undefined;
    total = res.body.total_count as number;
    newestFirst.push(...res.body.data);
    if (res.body.has_more !== true) break;
  }
  if (newestFirst.length !== total || new Set(newestFirst.map((e) => e.event_id)).size !== total) return undefined;
  return newestFirst.reverse();
}

/** The events of the key's merchant and environment, oldest first, once no more are being written. */
async function listedOldestFirst(url: string, apiKey: string): Promise<JsonBody[]> {
  const listed = await readList(url, apiKey);
  expect(listed, "the list changed while it was read").toBeDefined();
  return listed!;
}

/** The events after the one with `eventId` in a sequence that holds it. */
function listedAfter(events: readonly JsonBody[], eventId: string): JsonBody[] {
  const at = events.findIndex((e) => e.event_id === eventId);
  expect(at, `${eventId} is listed`).toBeGreaterThanOrEqual(0);
  return events.slice(at + 1);
}

/** A streamed event under the REST field names, as /events/list shows it without its delivery block. */
function asListed(event: Event): JsonBody {
  return {
    event_id: event.eventId,
    type: event.type,
    created: iso(event.created),
    data: event.data === undefined ? null : { object: event.data.object ?? null },
  };
}

/** A listed event without its delivery block, which streamed events do not carry. */
function withoutDelivery(event: JsonBody): JsonBody {
  const { delivery: _delivery, ...payload } = event;
  return payload;
}

/** Event ids, each with its type, for readable diffs of long sequences. */
const streamedIds = (events: readonly Event[]) => events.map((e) => `${e.eventId} ${e.type}`);
const listedIds = (events: readonly JsonBody[]) => events.map((e) => `${e.event_id} ${e.type}`);

/**
 * Asserts that the consumer received exactly `expected` (listed events, oldest first): the same
 * events in the same order, each with the same type, time and object, and no delivery block.
 */
function expectReceived(received: readonly Event[], expected: readonly JsonBody[]): void {
  expect(streamedIds(received)).toEqual(listedIds(expected));
  expect(received.map(asListed)).toEqual(expected.map(withoutDelivery));
  expect(received.filter((e) => e.delivery !== undefined)).toEqual([]);
}

/** A consumer of one stream, keeping every event it received in order. */
interface Consumer {
  readonly received: Event[];
  /** Resolves when the stream's response headers arrive: from then on, every event committed reaches it. */
  readonly live: Promise<void>;
  /** Why the stream ended without stop(): its error, or that it ended by itself; undefined while it runs. */
  failure(): unknown;
  /** Resolves once the stream has ended, however. */
  readonly ended: Promise<void>;
  /** Aborts the stream and waits for its end. */
  stop(): Promise<void>;
}

/** Starts consuming StreamEvents over `protocol`, after `afterEventId` or from now. */
function consume(url: string, protocol: RpcProtocol, apiKey: string, afterEventId?: string): Consumer {
  const client = rpcClient(EventService, url, protocol, { apiKey });
  const controller = new AbortController();
  const received: Event[] = [];
  let failure: unknown;
  let headersArrived = () => {};
  const live = new Promise<void>((resolve) => {
    headersArrived = resolve;
  });
  const ended = (async () => {
    try {
      for await (const event of client.streamEvents(afterEventId === undefined ? {} : { afterEventId }, {
        signal: controller.signal,
        onHeader: () => headersArrived(),
      })) {
        received.push(event);
      }
      failure = new Error("the stream ended by itself");
    } catch (error) {
      if (!controller.signal.aborted) failure = error;
    }
  })();
  return {
    received,
    live,
    failure: () => failure,
    ended,
    async stop() {
      controller.abort();
      await ended;
    },
  };
}

/** Consumers still running when a test ends (it failed): stopped after each describe so no stream outlives its service. */
const consumers = new Set<Consumer>();
function tracked(consumer: Consumer): Consumer {
  consumers.add(consumer);
  void consumer.ended.then(() => consumers.delete(consumer));
  return consumer;
}
afterAll(async () => {
  await Promise.all([...consumers].map((c) => c.stop()));
});

/** Fails the test at once when the consumer's stream broke. */
function expectRunning(consumer: Consumer): void {
  if (consumer.failure() !== undefined) throw consumer.failure();
}

/** Waits until the consumer has received at least `count` events (failing at once if its stream broke); returns them. */
async function receivedAtLeast(consumer: Consumer, count: number): Promise<Event[]> {
  await waitUntil(
    async () => {
      await sleep(50);
      expectRunning(consumer);
      return consumer.received.length;
    },
    (n) => n >= count,
    1200,
  );
  return consumer.received;
}

/**
 * Writes one event in the scope of the streams being checked and returns how to know it: an end
 * marker. A stream sends events in commit order, so once it shows the marker, nothing committed
 * before it (a duplicate, a stray event) is still on its way: no waiting "long enough" needed.
 */
type EndMarker = () => Promise<(event: Event) => boolean>;

/** A payment created for the merchant: its creation event ends what a sandbox stream is checked for. */
function paymentMarker(url: string, merchant: TestMerchant): EndMarker {
  return async () => {
    const { payment_id: paymentId } = await createPayment(url, merchant, { amount: 1 });
    return (event) => (event.data?.object as JsonBody | undefined)?.payment_id === paymentId;
  };
}

/** A production event written directly (no production processor exists yet): the end of a production stream. */
function productionMarker(merchant: TestMerchant): EndMarker {
  return async () => {
    const eventId = await insertEvent(merchant, true);
    return (event) => event.eventId === eventId;
  };
}

/**
 * Asserts that each consumer streamed exactly `expected` (after `processedBefore`: what a consumer
 * it resumes from had handled), then the end marker written once it had that many: nothing
 * missing, nothing twice, nothing stray. The marker's event is the merchant's like any other, so
 * the list read next shows it.
 */
async function expectStreamed(
  consumers: Consumer | readonly Consumer[],
  expected: readonly JsonBody[],
  marker: EndMarker,
  processedBefore: readonly Event[] = [],
): Promise<void> {
  const all = [consumers].flat();
  for (const consumer of all) await receivedAtLeast(consumer, expected.length - processedBefore.length);
  const isMarker = await marker();
  for (const consumer of all) {
    await waitUntil(
      async () => {
        await sleep(25);
        expectRunning(consumer);
        return consumer.received.some(isMarker);
      },
      (seen) => seen,
      2400,
    );
    const streamed = [...processedBefore, ...consumer.received];
    expect(isMarker(streamed.at(-1)!), "the marker is the last event streamed").toBe(true);
    expectReceived(streamed.slice(0, -1), expected);
  }
}

/** Resolves with `promise`, or fails naming `what` when it takes longer than `seconds`. */
async function withinSeconds(promise: Promise<void>, seconds: number, what: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${seconds} s`)), seconds * 1000);
  });
  try {
    await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** How a stream that should be refused fails: rejects with its error; resolves (so expectError fails) on an event. */
async function firstOutcome(url: string, protocol: RpcProtocol, apiKey: string, afterEventId: string): Promise<Event> {
  const controller = new AbortController();
  try {
    for await (const event of rpcClient(EventService, url, protocol, { apiKey }).streamEvents(
      { afterEventId },
      { signal: controller.signal },
    )) {
      return event;
    }
    throw new Error("the stream ended without an error");
  } finally {
    controller.abort();
  }
}

/** Writes an event of the merchant straight into the database, as the production environment would (it has no processor yet). */
async function insertEvent(merchant: TestMerchant, livemode: boolean): Promise<string> {
  const eventId = uniqueId("evt");
  const objectId = uniqueId("pay");
  await service.app.dataSource.query(
    `INSERT INTO events (event_id, merchant_id, livemode, type, object_id, profile_id, data, created)
     VALUES ($1, $2, $3, 'payment.requires_payment_method', $4, $5, $6, now())`,
    [eventId, merchant.merchantId, livemode, objectId, merchant.profileId, JSON.stringify({ object: { payment_id: objectId } })],
  );
  return eventId;
}

/*
 * What the stream sends is the same over every protocol (the parity suite, test/parity, carries
 * StreamEvents over each): its business runs once, over gRPC. Only when the head goes out depends on
 * the protocol's handler (src/stream-head.ts), so that test runs over each.
 */
describe("StreamEvents", { timeout: 120_000 }, () => {
  const protocol = "grpc";

  it("after an event: the events /events/list shows after it, oldest first, then each new one as it commits", async () => {
    const merchant = await newMerchant(service.url);
    const first = await paidPayment(service.url, merchant);
    await settledRefund(service.url, merchant, (await createRefund(service.url, merchant, first.payment_id, 1000)).refund_id);
    await createPayment(service.url, merchant);
    const before = await listedOldestFirst(service.url, merchant.apiKey);
    expect(before.length).toBeGreaterThanOrEqual(4);
    const start = before[1]!.event_id as string;

    const consumer = tracked(consume(service.url, protocol, merchant.apiKey, start));
    const marker = paymentMarker(service.url, merchant);
    // The backlog: what the list shows after the event, in the reverse order.
    await expectStreamed(consumer, listedAfter(before, start), marker);

    // New events as they commit: a payment, its instant refund (pending, then succeeded from the job runner), an unconfirmed payment.
    const next = await paidPayment(service.url, merchant, 7000);
    const refund = await createRefund(service.url, merchant, next.payment_id, 2500);
    expect((await settledRefund(service.url, merchant, refund.refund_id)).status).toBe("succeeded");
    await createPayment(service.url, merchant, { amount: 1200 });

    const listed = await listedOldestFirst(service.url, merchant.apiKey);
    const expected = listedAfter(listed, start);
    expect(expected.length).toBeGreaterThan(listedAfter(before, start).length);
    expect(expected.filter((e) => e.data.object.refund_id === refund.refund_id).map((e) => e.type)).toEqual([
      "refund.pending",
      "refund.succeeded",
    ]);
    await expectStreamed(consumer, expected, marker);
    await consumer.stop();
    expect(consumer.failure()).toBeUndefined();
  });

  it.each(protocols)(
    "without after_event_id, over %s: headers at once, then every event committed after them, in order",
    async (protocol) => {
      const merchant = await newMerchant(service.url);
      const consumer = tracked(consume(service.url, protocol, merchant.apiKey));
      await withinSeconds(consumer.live, 5, "the stream's headers");
      await createPayment(service.url, merchant);
      const last = await paidPayment(service.url, merchant);
      await settledRefund(service.url, merchant, (await createRefund(service.url, merchant, last.payment_id, 500)).refund_id);

      // The merchant's every event was committed after the headers arrived: the stream has them all.
      const listed = await listedOldestFirst(service.url, merchant.apiKey);
      await expectStreamed(consumer, listed, paymentMarker(service.url, merchant));
      await consumer.stop();
    },
  );

  it("an event committed the moment the headers arrive is always the first streamed, round after round", async () => {
    const merchant = await newMerchant(service.url);
    for (let round = 0; round < 5; round++) {
      const consumer = tracked(consume(service.url, protocol, merchant.apiKey));
      await withinSeconds(consumer.live, 5, "the stream's headers");
      const payment = await createPayment(service.url, merchant);
      const [first] = await receivedAtLeast(consumer, 1);
      expect(first!.data?.object).toMatchObject({ payment_id: payment.payment_id });
      await consumer.stop();
    }
  });

  describe("scope", () => {
    it("another merchant's events and the production ones never reach a sandbox stream; a production key streams only production events", async () => {
      const merchant = await newMerchant(service.url);
      const other = await newMerchant(service.url);
      const productionKey = await issueKey(service.url, merchant.merchantId, "production");
      await paidPayment(service.url, merchant);
      await paidPayment(service.url, other);
      const sandboxStart = (await listedOldestFirst(service.url, merchant.apiKey)).at(-1)!.event_id as string;
      const othersStart = (await listedOldestFirst(service.url, other.apiKey)).at(-1)!.event_id as string;
      const productionStart = await insertEvent(merchant, true);

      const sandbox = tracked(consume(service.url, protocol, merchant.apiKey, sandboxStart));
      const production = tracked(consume(service.url, protocol, productionKey, productionStart));
      const othersConsumer = tracked(consume(service.url, protocol, other.apiKey, othersStart));

      // Each write commits before the next starts, so a stream that shows a later write has passed every earlier one.
      const otherPayment = await paidPayment(service.url, other);
      await createRefund(service.url, other, otherPayment.payment_id, 100);
      const live = await insertEvent(merchant, true);
      await paidPayment(service.url, merchant, 4200);
      const liveLast = await insertEvent(merchant, true);
      await createPayment(service.url, merchant, { amount: 4300 });

      const sandboxListed = await listedOldestFirst(service.url, merchant.apiKey);
      expect(sandboxListed.map((e) => e.event_id)).not.toContain(live);
      await expectStreamed(sandbox, listedAfter(sandboxListed, sandboxStart), paymentMarker(service.url, merchant));

      const productionListed = await listedOldestFirst(service.url, productionKey);
      expect(productionListed.map((e) => e.event_id)).toEqual([productionStart, live, liveLast]);
      await expectStreamed(production, listedAfter(productionListed, productionStart), productionMarker(merchant));

      // The other merchant's stream has its own events only.
      await expectStreamed(
        othersConsumer,
        listedAfter(await settledEvents(service.url, other.apiKey), othersStart),
        paymentMarker(service.url, other),
      );

      await Promise.all([sandbox.stop(), production.stop(), othersConsumer.stop()]);
    });

    it("after_event_id unknown, another merchant's, or of the other environment: not_found (HE_02)", async () => {
      const merchant = await newMerchant(service.url);
      const other = await newMerchant(service.url);
      await paidPayment(service.url, merchant);
      await paidPayment(service.url, other);
      const othersEvent = (await listedOldestFirst(service.url, other.apiKey)).at(-1)!.event_id as string;
      const ownEvent = (await listedOldestFirst(service.url, merchant.apiKey)).at(-1)!.event_id as string;
      const productionEvent = await insertEvent(merchant, true);
      const productionKey = await issueKey(service.url, merchant.merchantId, "production");

      for (const missing of ["evt_doesnotexist", othersEvent, productionEvent]) {
        await expectError(firstOutcome(service.url, protocol, merchant.apiKey, missing), "HE_02", "after_event_id");
      }
      // The production key does not find the sandbox event either.
      await expectError(firstOutcome(service.url, protocol, productionKey, ownEvent), "HE_02", ownEvent);
    });

    it("a publishable key may not stream events (IR_22), nor an unknown key (IR_01)", async () => {
      const merchant = await newMerchant(service.url);
      await paidPayment(service.url, merchant);
      const ownEvent = (await listedOldestFirst(service.url, merchant.apiKey)).at(-1)!.event_id as string;
      const publishable = await issueKey(service.url, merchant.merchantId, "sandbox", "publishable");
      await expectError(firstOutcome(service.url, protocol, publishable, ownEvent), "IR_22");
      await expectRpcError(firstOutcome(service.url, protocol, `${merchant.apiKey}x`, ownEvent), Code.Unauthenticated, "IR_01");
    });
  });
});

describe("concurrent writers", () => {
  const payments = 200;

  it(`${payments} payments and their refunds created at once${onPostgres ? " on two instances" : ""}: every consumer gets every event once, in the reverse list order`, {
    timeout: 240_000,
  }, async () => {
    const merchant = await newMerchant(service.url);
    await paidPayment(service.url, merchant);
    const start = (await listedOldestFirst(service.url, merchant.apiKey)).at(-1)!.event_id as string;
    // One consumer per protocol, on both instances.
    const streams = protocols.map((protocol, i) => tracked(consume(writer(i).url, protocol, merchant.apiKey, start)));

    const refunds = await Promise.all(
      Array.from({ length: payments }, async (_, i) => {
        const url = writer(i).url;
        if (i % 5 === 4) return createPayment(url, merchant, { amount: 1000 + i }).then(() => []);
        const payment = await paidPayment(url, merchant, 1000 + i);
        if (i % 4 === 3) return [];
        // Two partial refunds of one payment at once, on both instances.
        return Promise.all([
          createRefund(url, merchant, payment.payment_id, 100),
          createRefund(writer(i + 1).url, merchant, payment.payment_id, 200),
        ]);
      }),
    );
    const listed = await settledEvents(service.url, merchant.apiKey);
    expect(listed.filter((e) => e.type === "refund.succeeded")).toHaveLength(refunds.flat().length);
    const expected = listedAfter(listed, start);
    expect(expected.length).toBeGreaterThanOrEqual(payments);
    const marker = paymentMarker(service.url, merchant);
    await expectStreamed(streams, expected, marker);
    await Promise.all(streams.map((s) => s.stop()));

    // A consumer that starts after everything committed reads the whole backlog, batch after batch (500 at a time).
    expect(expected.length).toBeGreaterThan(500);
    const late = tracked(consume(writer(1).url, "connect", merchant.apiKey, start));
    await expectStreamed(late, listedAfter(await listedOldestFirst(service.url, merchant.apiKey), start), marker);
    await late.stop();
  });

  it.skipIf(!onPostgres)(
    "a transaction that got its id first but commits last: the stream holds back the later commits until it ends, then sends its event first",
    { timeout: 120_000 },
    async () => {
      const merchant = await newMerchant(service.url);
      await paidPayment(service.url, merchant);
      const start = (await listedOldestFirst(service.url, merchant.apiKey)).at(-1)!.event_id as string;
      const consumer = tracked(consume(service.url, "connect", merchant.apiKey, start));

      const db = new pg.Client({ connectionString: await fileDatabaseUrl() });
      await db.connect();
      try {
        await db.query("BEGIN");
        const lateId = uniqueId("evt");
        const objectId = uniqueId("pay");
        await db.query(
          `INSERT INTO events (event_id, merchant_id, livemode, type, object_id, profile_id, data, created)
           VALUES ($1, $2, false, 'payment.requires_payment_method', $3, $4, $5, now())`,
          [lateId, merchant.merchantId, objectId, merchant.profileId, JSON.stringify({ object: { payment_id: objectId } })],
        );

        // Payments written and committed through the API while that transaction (an older id) stays open.
        await Promise.all(Array.from({ length: 6 }, (_, i) => paidPayment(writer(i).url, merchant, 2000 + i)));
        const committed = listedAfter(await listedOldestFirst(service.url, merchant.apiKey), start);
        expect(committed.length).toBeGreaterThanOrEqual(6);
        await sleep(2500);
        expectRunning(consumer);
        expect(streamedIds(consumer.received)).toEqual([]);

        await db.query("COMMIT");
        const expected = listedAfter(await listedOldestFirst(service.url, merchant.apiKey), start);
        expect(expected[0]!.event_id).toBe(lateId);
        expect(listedIds(expected.slice(1))).toEqual(listedIds(committed));
        await expectStreamed(consumer, expected, paymentMarker(service.url, merchant));
        await consumer.stop();
      } finally {
        await db.query("ROLLBACK").catch(() => undefined);
        await db.end();
      }
    },
  );
});

describe.skipIf(!onPostgres)("resuming after a server is killed (PostgreSQL only: two server processes share the database)", () => {
  const servers: ServerProcess[] = [];
  let databaseUrl: string;
  let b: ServerProcess;

  async function startServer(): Promise<ServerProcess> {
    const server = await spawnServer({ DATABASE_URL: databaseUrl, DATABASE_POOL_SIZE: "4" });
    servers.push(server);
    return server;
  }

  beforeAll(async () => {
    databaseUrl = (await fileDatabaseUrl())!;
    b = await startServer();
  });
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.kill()));
  });

  // Over gRPC, as the stream's other rules: how each protocol carries a stream, and one cut short,
  // is the parity suite's subject (test/parity).
  it("SIGKILL mid-stream, reconnect to the other instance after the last event processed: no gap, no duplicate", {
    timeout: 180_000,
  }, async () => {
    const protocol = "grpc";
    const a = await startServer();
    const merchant = await newMerchant(b.url);
    await paidPayment(b.url, merchant);
    const start = (await listedOldestFirst(b.url, merchant.apiKey)).at(-1)!.event_id as string;

    // Writers on both instances until told to stop; those on the killed one stop at the kill.
    let writing = true;
    let aAlive = true;
    let written = 0;
    const lanes = Promise.all(
      Array.from({ length: 4 }, async (_, lane) => {
        for (let i = 0; writing && written < 400; i++) {
          const onA = lane % 2 === 1;
          if (onA && !aAlive) return;
          const url = onA ? a.url : b.url;
          try {
            const payment = await paidPayment(url, merchant, 1000 + written);
            if (i % 3 === 2) await createRefund(url, merchant, payment.payment_id, 300);
          } catch (error) {
            // A call in flight on the killed instance may fail; the list shows whatever it committed.
            if (onA && !aAlive) return;
            throw error;
          }
          written++;
        }
      }),
    );
    // Awaited below; a writer failing before then must not be an unhandled rejection.
    lanes.catch(() => undefined);

    const first = tracked(consume(a.url, protocol, merchant.apiKey, start));
    await receivedAtLeast(first, 8);
    aAlive = false;
    await a.kill();
    await first.ended;
    expect(first.failure()).toBeDefined();
    const processed = [...first.received];
    const resumeAfter = processed.at(-1)!.eventId;

    const second = tracked(consume(b.url, protocol, merchant.apiKey, resumeAfter));
    // Writes go on while the consumer resumes, then stop.
    await receivedAtLeast(second, 8);
    writing = false;
    await lanes;
    const expected = listedAfter(await settledEvents(b.url, merchant.apiKey), start);
    await expectStreamed(second, expected, paymentMarker(b.url, merchant), processed);
    await second.stop();
  });
});
