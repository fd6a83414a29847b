import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { cardData } from "./support/cards.js";
import { type JsonBody, rest } from "./support/clients.js";
import { fileDatabaseUrl, onPostgres } from "./support/database.js";
import { newMerchant, type TestMerchant, updateProfile } from "./support/merchant.js";
import { createPayment } from "./support/payments.js";
import { runningService, servicePair } from "./support/running.js";
import { type ServerProcess, spawnServer } from "./support/server-process.js";
import { noPolling, type TestService } from "./support/service.js";
import { sleep, waitUntil } from "./support/wait.js";
import { alwaysOk, startReceiver, type WebhookReceiver } from "./support/webhook-receiver.js";

/*
 * Webhook delivery with more than one sender: every instance's dispatcher takes due deliveries with
 * FOR UPDATE SKIP LOCKED and leases them (70 s), so two instances on one database send each event
 * once, and a delivery whose instance died is sent by another once its lease has run out (at least
 * once). The embedded database belongs to one instance, so there the first part runs one instance
 * (still every event exactly once), and the kill -9 part, which needs a database two processes
 * share, runs on PostgreSQL only.
 *
 * These run on the real clock (the dispatcher polls every 100 ms), except the server processes,
 * whose sandbox test clock is moved past the lease.
 */

/** Every event of the merchant, newest first, page by page. */
async function allEvents(url: string, merchant: TestMerchant): Promise<JsonBody[]> {
  const events: JsonBody[] = [];
  for (let offset = 0; ; offset += 100) {
    const res = await rest(url, "GET", `/events/list?limit=100&offset=${offset}`, { apiKey: merchant.apiKey });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    events.push(...res.body.data);
    if (!res.body.has_more) return events;
  }
}

/** How many times each webhook-id arrived. */
function arrivals(receiver: WebhookReceiver): Map<string, number> {
  const counts = new Map<string, number>();
  for (const request of receiver.requests) {
    const id = request.headers["webhook-id"] as string;
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

/** Runs `work` for 0..count-1, `width` at a time. */
async function inBatches(count: number, width: number, work: (i: number) => Promise<unknown>): Promise<void> {
  for (let start = 0; start < count; start += width) {
    await Promise.all(Array.from({ length: Math.min(width, count - start) }, (_, k) => work(start + k)));
  }
}

describe(`${onPostgres ? "two instances" : "one instance (embedded database)"} delivering many events to one receiver`, () => {
  const pair = onPostgres ? servicePair(noPolling) : undefined;
  const single = onPostgres ? undefined : runningService(noPolling);
  const instances = (): TestService[] => (pair === undefined ? [single!] : [pair.a, pair.b]);
  let receiver: WebhookReceiver | undefined;
  afterAll(() => receiver?.close());

  it("sends every event exactly once: no webhook-id twice, none missing, each delivered at its first attempt", {
    timeout: 120_000,
  }, async () => {
    // A few milliseconds per answer, so many attempts are in flight on both instances at once.
    receiver = await startReceiver((_request, index) => ({ status: 200, delayMs: index % 7 }));
    const merchantCount = 5;
    const paymentsPerMerchant = 52;
    const merchants: TestMerchant[] = [];
    for (let m = 0; m < merchantCount; m++) {
      const merchant = await newMerchant(instances()[0]!.url);
      await updateProfile(instances()[0]!.url, merchant, { webhook_url: receiver.url });
      merchants.push(merchant);
    }
    // Each payment is created on one instance and confirmed on the other: two events, written by both.
    await inBatches(merchantCount * paymentsPerMerchant, 20, async (i) => {
      const merchant = merchants[i % merchantCount]!;
      const here = instances()[i % instances().length]!;
      const there = instances()[(i + 1) % instances().length]!;
      const payment = await createPayment(here.url, merchant);
      const confirmed = await rest(there.url, "POST", `/payments/${payment.payment_id}/confirm`, {
        apiKey: merchant.apiKey,
        body: { payment_method_data: cardData("4242424242424242", new Date()) },
      });
      expect(confirmed.status, JSON.stringify(confirmed.body)).toBe(200);
    });

    const events = (await Promise.all(merchants.map((m) => allEvents(instances()[0]!.url, m)))).flat();
    expect(events.length).toBeGreaterThanOrEqual(500);
    const eventIds = new Set(events.map((e) => e.event_id as string));
    expect(eventIds.size).toBe(events.length);

    await waitUntil(
      async () => {
        await sleep(100);
        return arrivals(receiver!).size;
      },
      (n) => n >= eventIds.size,
      600,
    );
    // Whatever is still due is sent now, and a few more polls of both dispatchers find nothing to send again.
    await Promise.all(instances().map((instance) => instance.app.webhooks.deliverDue()));
    await sleep(500);

    const counts = arrivals(receiver);
    const twice = [...counts].filter(([, n]) => n > 1);
    expect(twice, "webhook-ids that arrived more than once").toEqual([]);
    expect(new Set(counts.keys())).toEqual(eventIds);
    expect(receiver.requests).toHaveLength(events.length);

    const after = (await Promise.all(merchants.map((m) => allEvents(instances().at(-1)!.url, m)))).flat();
    const notDelivered = after.filter((e) => e.delivery.status !== "delivered" || e.delivery.attempts !== 1);
    expect(
      notDelivered.map((e) => [e.event_id, e.delivery]),
      "events not delivered at their first attempt",
    ).toEqual([]);
    expect(after).toHaveLength(events.length);
  });
});

describe.skipIf(!onPostgres)("a server killed with SIGKILL mid-delivery (PostgreSQL only: two processes share the database)", () => {
  const servers: ServerProcess[] = [];
  const receivers: WebhookReceiver[] = [];
  let db: pg.Client | undefined;
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.kill()));
    await Promise.all(receivers.map((receiver) => receiver.close()));
    await db?.end();
  });

  /** A direct connection to the file's database, opened once, to read the deliveries' leases. */
  async function openDatabase(databaseUrl: string): Promise<pg.Client> {
    if (db === undefined) {
      db = new pg.Client({ connectionString: databaseUrl });
      await db.connect();
    }
    return db;
  }

  async function startServer(databaseUrl: string): Promise<ServerProcess> {
    const server = await spawnServer({
      DATABASE_URL: databaseUrl,
      DATABASE_POOL_SIZE: "4",
      SANDBOX_TEST_CLOCK: "true",
      WEBHOOK_ENDPOINT_CONCURRENCY: "10",
    });
    servers.push(server);
    return server;
  }

  it("the deliveries it had taken are sent by the next server once their 70 s lease has run out", { timeout: 120_000 }, async () => {
    const databaseUrl = (await fileDatabaseUrl())!;
    const db = await openDatabase(databaseUrl);
    // A receiver that takes the requests and never answers them.
    const receiver = await startReceiver(() => ({ hold: true }));
    receivers.push(receiver);

    const first = await startServer(databaseUrl);
    const merchant = await newMerchant(first.url);
    await updateProfile(first.url, merchant, { webhook_url: receiver.url });
    const leasedRows = async () =>
      (
        await db.query<{ event_id: string; leased_until: Date | null; status: string; attempts: number }>(
          "SELECT event_id, leased_until, status, attempts FROM webhook_deliveries WHERE merchant_id = $1",
          [merchant.merchantId],
        )
      ).rows;
    const leasedCount = async () => (await leasedRows()).filter((row) => row.leased_until !== null).length;
    // A first wave the server takes and sends: the receiver holds every request open.
    await Promise.all(Array.from({ length: 4 }, (_, i) => createPayment(first.url, merchant, { amount: 100 + i })));
    const { held } = await waitUntil(
      async () => {
        await sleep(20);
        return { leased: await leasedCount(), held: receiver.held() };
      },
      (seen) => seen.held > 0 && seen.held === seen.leased,
    );
    expect(held).toBe(4);
    // A second wave: a server sends at most WEBHOOK_ENDPOINT_CONCURRENCY (10) at once to one receiver,
    // and takes only a few rounds of its deliveries ahead, leaving the rest to other servers.
    await Promise.all(Array.from({ length: 36 }, (_, i) => createPayment(first.url, merchant, { amount: 200 + i })));
    await waitUntil(
      async () => {
        await sleep(20);
        return receiver.held();
      },
      (open) => open === 10,
    );
    await sleep(300);
    expect(receiver.held()).toBe(10);
    const taken = await leasedCount();
    expect(taken).toBeGreaterThanOrEqual(10);
    // It asks for up to 20 more whenever it holds fewer than 20.
    expect(taken).toBeLessThanOrEqual(39);
    const eventIds = (await allEvents(first.url, merchant)).map((e) => e.event_id as string);
    expect(eventIds).toHaveLength(40);
    const heldIds = new Set(receiver.requests.map((r) => r.headers["webhook-id"] as string));
    await first.kill();

    const atKill = await leasedRows();
    expect(atKill).toHaveLength(40);
    const leasedAtKill = atKill.filter((row) => row.leased_until !== null);
    for (const id of heldIds) expect(leasedAtKill.map((row) => row.event_id)).toContain(id);
    for (const row of atKill) expect(row).toMatchObject({ status: "pending", attempts: 0 });
    for (const row of leasedAtKill) {
      const leaseLeft = row.leased_until!.getTime() - Date.now();
      expect(leaseLeft).toBeGreaterThan(60_000);
      expect(leaseLeft).toBeLessThanOrEqual(70_000);
    }

    // The receiver is back; a new server on the same database.
    receiver.answerWith(alwaysOk);
    const before = receiver.requests.length;
    const second = await startServer(databaseUrl);
    const leased = new Set(leasedAtKill.map((row) => row.event_id));
    const unleased = eventIds.filter((id) => !leased.has(id));
    const statuses = async () => new Map((await allEvents(second.url, merchant)).map((e) => [e.event_id as string, e.delivery]));

    // What the dead server had not taken goes at once; what it had taken waits for its lease.
    await waitUntil(
      async () => {
        await sleep(50);
        return statuses();
      },
      (now) => unleased.every((id) => now.get(id).status === "delivered"),
    );
    await sleep(500);
    const waiting = await statuses();
    for (const id of leased) expect(waiting.get(id), id).toMatchObject({ status: "pending", attempts: 0 });
    const sentEarly = receiver.requests.slice(before).filter((r) => leased.has(r.headers["webhook-id"] as string));
    expect(
      sentEarly.map((r) => r.headers["webhook-id"]),
      "leased deliveries sent before their lease ended",
    ).toEqual([]);

    // Past the lease (the sandbox clock of every server on the database moves), they are sent.
    const moved = await rest(second.url, "POST", "/sandbox/clock/advance", { admin: true, body: { seconds: 71 } });
    expect(moved.status, JSON.stringify(moved.body)).toBe(200);
    const done = await waitUntil(
      async () => {
        await sleep(50);
        return statuses();
      },
      (now) => eventIds.every((id) => now.get(id).status === "delivered"),
    );
    for (const id of eventIds) {
      expect(done.get(id), id).toMatchObject({ status: "delivered", attempts: 1, last_response_status: 200, last_error: null });
    }
    // Every event arrived (again) after the kill, answered 200 this time.
    const afterKill = new Set(receiver.requests.slice(before).map((r) => r.headers["webhook-id"] as string));
    expect(afterKill).toEqual(new Set(eventIds));
    await second.stop();
  });

  it("a server stopped with SIGTERM finishes the attempts under way and gives back the rest, which the next server sends at once", {
    timeout: 120_000,
  }, async () => {
    const databaseUrl = (await fileDatabaseUrl())!;
    const db = await openDatabase(databaseUrl);
    const receiver = await startReceiver(() => ({ hold: true }));
    receivers.push(receiver);
    const first = await startServer(databaseUrl);
    const merchant = await newMerchant(first.url);
    await updateProfile(first.url, merchant, { webhook_url: receiver.url });
    await Promise.all(Array.from({ length: 40 }, (_, i) => createPayment(first.url, merchant, { amount: 300 + i })));
    const leasedCount = async () =>
      (
        await db.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM webhook_deliveries WHERE merchant_id = $1 AND leased_until IS NOT NULL",
          [merchant.merchantId],
        )
      ).rows[0]!.n;
    // Ten attempts held open by the receiver, and more taken behind them.
    await waitUntil(
      async () => {
        await sleep(20);
        return { held: receiver.held(), leased: await leasedCount() };
      },
      (seen) => seen.held === 10 && seen.leased > 10,
    );
    const inFlight = new Set(receiver.requests.map((r) => r.headers["webhook-id"] as string));
    expect(inFlight.size).toBe(10);

    const stopped = first.stop();
    // The attempts under way end (here with an answer) and their outcomes are written before the exit.
    await sleep(200);
    receiver.answerWith(alwaysOk);
    receiver.release(200);
    await stopped;
    const afterStop = (
      await db.query<{ event_id: string; leased_until: Date | null; status: string }>(
        "SELECT event_id, leased_until, status FROM webhook_deliveries WHERE merchant_id = $1",
        [merchant.merchantId],
      )
    ).rows;
    expect(afterStop).toHaveLength(40);
    expect(
      afterStop.filter((row) => row.leased_until !== null).map((row) => row.event_id),
      "deliveries still leased after the stop",
    ).toEqual([]);
    for (const row of afterStop) expect(row.status, row.event_id).toBe(inFlight.has(row.event_id) ? "delivered" : "pending");

    // No lease to wait out: the next server sends the other 30 straight away, on the same clock.
    const second = await startServer(databaseUrl);
    const delivered = await waitUntil(
      async () => {
        await sleep(50);
        return allEvents(second.url, merchant);
      },
      (events) => events.every((e) => e.delivery.status === "delivered"),
    );
    expect(delivered).toHaveLength(40);
    for (const event of delivered) expect(event.delivery.attempts, event.event_id as string).toBe(1);
    await second.stop();
  });
});
