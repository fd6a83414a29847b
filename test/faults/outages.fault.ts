import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createServer, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import pg from "pg";
import { answerMarginMs } from "../../src/db/pool.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { visaCard } from "../support/cards.js";
import { inSuiteForm } from "../support/database.js";
import { sleep, until } from "../support/wait.js";
import { countBy, kindOf } from "./answers.js";
import { rest, type JsonBody } from "../support/clients.js";
import { newMerchant, type TestMerchant, updateProfile } from "../support/merchant.js";
import { type PostgresCluster, startPostgresCluster, type StopMode } from "../support/postgres-cluster.js";
import { type RedisServer, startRedisServer } from "../support/redis-server.js";
import { type ServerProcess, spawnServer } from "../support/server-process.js";

/*
 * Issue 18, items 2 and 3: PostgreSQL restarting, down, frozen; Redis gone; a webhook receiver that
 * never answers. The server runs as a child process (so a crash is an exit we see) on a PostgreSQL
 * cluster and a redis-server of this file's own, which it restarts, stops and freezes; the shared
 * ones are never touched. Clients create and confirm payments with idempotency keys throughout, and
 * every figure is printed for docs/reliability.md.
 */

/** The server's limits, small so that every timeout is reached within the file's few minutes. */
const poolSize = 10;
const connectTimeoutMs = 2000;
const statementTimeoutMs = 3000;
const maxWaiting = 40;
const webhookConcurrency = 4;
/**
 * The longest a call may take while the database does not answer: a connection to wait for, or a
 * statement whose answer never comes, after what went well before it, plus slack for a shared, slow
 * machine. What the failed call still had to release is released once the database is back.
 */
const longestCallMs = connectTimeoutMs + statementTimeoutMs + answerMarginMs + 3000;
/** Concurrent clients, each creating a payment and confirming it, one call after another. */
const clients = 6;

/** One call a client made, and what it got. */
interface Call {
  readonly kind: "create" | "confirm";
  readonly key: string;
  readonly paymentId: string | undefined;
  /** What was sent: a retry with the key sends it again. */
  readonly sent: Record<string, unknown>;
  readonly started: number;
  readonly ms: number;
  /** The HTTP status, or 0 when no answer came (the connection failed). */
  readonly status: number;
  readonly body: JsonBody;
}

async function call(
  url: string,
  merchant: TestMerchant,
  kind: Call["kind"],
  key: string,
  paymentId: string | undefined,
  body: Record<string, unknown>,
): Promise<Call> {
  const started = Date.now();
  const path = kind === "create" ? "/payments" : `/payments/${paymentId}/confirm`;
  try {
    const res = await rest(url, "POST", path, { apiKey: merchant.apiKey, body, headers: { "x-idempotency-key": key } });
    return { kind, key, paymentId, sent: body, started, ms: Date.now() - started, status: res.status, body: res.body };
  } catch (error) {
    return {
      kind,
      key,
      paymentId,
      sent: body,
      started,
      ms: Date.now() - started,
      status: 0,
      body: String((error as Error).cause ?? error),
    };
  }
}

/** A payment create and its confirm, each with its own idempotency key. */
function createBody(merchant: TestMerchant): Record<string, unknown> {
  return { amount: 1000 + Math.floor(Math.random() * 9000), currency: "USD", profile_id: merchant.profileId };
}
const confirmBody = { payment_method_data: { card: visaCard } };

/** Clients calling until stopped; what they sent is kept, so that what was not answered can be sent again. */
class Load {
  readonly calls: Call[] = [];
  private stopped = false;
  private readonly running: Promise<void>[] = [];

  constructor(
    private readonly url: string,
    private readonly merchant: TestMerchant,
  ) {
    for (let i = 0; i < clients; i++) this.running.push(this.client());
  }

  private async client(): Promise<void> {
    while (!this.stopped) {
      const created = await call(this.url, this.merchant, "create", `c-${randomUUID()}`, undefined, createBody(this.merchant));
      this.calls.push(created);
      if (created.status !== 200) {
        // A pause before the next call, as Retry-After asks (shortened: the file has minutes, not hours).
        await new Promise((resolve) => setTimeout(resolve, 200));
        continue;
      }
      this.calls.push(await call(this.url, this.merchant, "confirm", `f-${randomUUID()}`, created.body.payment_id, confirmBody));
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.running);
  }
}

/** The figures of one fault, printed and kept for the summary. */
const figures: Record<string, Record<string, unknown>> = {};

describe("database and Redis outages, frozen dependencies", () => {
  let cluster: PostgresCluster;
  let redis: RedisServer;
  let server: ServerProcess;

  beforeAll(async () => {
    cluster = await startPostgresCluster();
    const admin = new pg.Client({ connectionString: cluster.url() });
    await admin.connect();
    await admin.query("CREATE DATABASE payments");
    await admin.end();
    redis = await startRedisServer();
    server = await spawnServer({
      DATABASE_URL: inSuiteForm(cluster.url("payments")),
      REDIS_URL: redis.url,
      DATABASE_POOL_SIZE: String(poolSize),
      DATABASE_CONNECT_TIMEOUT_MS: String(connectTimeoutMs),
      DATABASE_STATEMENT_TIMEOUT_MS: String(statementTimeoutMs),
      DATABASE_MAX_WAITING: String(maxWaiting),
      WEBHOOK_ENDPOINT_CONCURRENCY: String(webhookConcurrency),
      RATE_LIMIT_PER_MINUTE: "1000000",
    });
  }, 120_000);

  afterAll(async () => {
    await server?.kill();
    redis?.destroy();
    cluster?.destroy();
    console.log(`\nOUTAGE FIGURES\n${JSON.stringify(figures, null, 2)}`);
  });

  /** The server never exited; if it did, its last lines say why. */
  function expectAlive(): void {
    expect(server.running(), server.output().slice(-4000)).toBe(true);
  }

  /** The time the service first creates a payment, from `from`; the probes are the load's calls too. */
  async function firstSuccessAfter(load: Load, merchant: TestMerchant, from: number): Promise<number> {
    for (;;) {
      const created = await call(server.url, merchant, "create", `p-${randomUUID()}`, undefined, createBody(merchant));
      load.calls.push(created);
      if (created.status === 200) return Date.now() - from;
      if (Date.now() - from > 30_000) throw new Error(`no success within 30 s of the database's return; last: ${kindOf(created)}`);
      await sleep(10);
    }
  }

  /**
   * What every fault must leave: calls answered 2xx or 503 SU_01 with its message (no 500, no
   * answer missing), none waiting past the configured timeouts; then every call not answered is
   * sent again with its key until it is, and every acknowledged payment is in the database with the
   * status it was acknowledged with, one per create key.
   */
  async function verify(name: string, merchant: TestMerchant, load: Load, extra: Record<string, unknown>): Promise<void> {
    expectAlive();
    const calls = load.calls;
    const failures = calls.filter((c) => c.status !== 200);
    for (const failure of failures) {
      expect({ status: failure.status, code: failure.body?.error?.code }, JSON.stringify(failure.body)).toEqual({
        status: 503,
        code: "SU_01",
      });
      expect(failure.body.error.message).toMatch(/^The service's database is unavailable or did not answer in time; retry/);
    }
    const slowest = Math.max(...calls.map((c) => c.ms));
    expect(slowest).toBeLessThan(longestCallMs);

    // Every call not answered goes again with its key; a create then has its one payment.
    const paymentOfKey = new Map<string, string>();
    const statusOf = new Map<string, string>();
    for (const c of calls.filter((c) => c.status === 200)) {
      if (c.kind === "create") paymentOfKey.set(c.key, c.body.payment_id);
      else statusOf.set(c.paymentId!, c.body.status);
    }
    const retries = [...failures];
    await Promise.all(
      Array.from({ length: clients }, async () => {
        for (let failure = retries.shift(); failure !== undefined; failure = retries.shift()) {
          let retried: Call | undefined;
          await until(
            `the retry of ${failure.kind} ${failure.key}`,
            async () => {
              retried = await call(server.url, merchant, failure!.kind, failure!.key, failure!.paymentId, failure!.sent);
              return retried.status === 200;
            },
            10_000,
            100,
          ).catch((error: Error) => {
            throw new Error(`${error.message}; last answer ${kindOf(retried!)}: ${JSON.stringify(retried!.body)}`);
          });
          if (failure.kind === "create") paymentOfKey.set(failure.key, retried!.body.payment_id);
          else statusOf.set(failure.paymentId!, retried!.body.status);
        }
      }),
    );
    // One payment per create key, whatever was answered: no retry made a second one.
    const listed = await rest(server.url, "GET", "/payments/list?limit=1", { apiKey: merchant.apiKey });
    expect(listed.body.total_count).toBe(paymentOfKey.size);
    for (const [paymentId, status] of statusOf) {
      const res = await rest(server.url, "GET", `/payments/${paymentId}`, { apiKey: merchant.apiKey });
      expect({ paymentId, status: res.body?.status }).toEqual({ paymentId, status });
    }
    for (const paymentId of paymentOfKey.values()) {
      const res = await rest(server.url, "GET", `/payments/${paymentId}`, { apiKey: merchant.apiKey });
      expect(res.status, `acknowledged payment ${paymentId}`).toBe(200);
    }
    figures[name] = {
      calls: calls.length,
      acknowledged: calls.length - failures.length,
      answers: countBy(calls, kindOf),
      median_call_ms: [...calls.map((c) => c.ms)].sort((a, b) => a - b)[Math.floor(calls.length / 2)],
      slowest_call_ms: slowest,
      retried_after: failures.length,
      ...extra,
    };
    console.log(name, JSON.stringify(figures[name]));
  }

  it.each<[string, StopMode]>([
    ["restart -m fast", "fast"],
    ["restart -m immediate", "immediate"],
  ])("PostgreSQL %s under load: no crash, 503 SU_01 meanwhile, nothing acknowledged lost, service back at once", async (name, mode) => {
    const merchant = await newMerchant(server.url);
    const load = new Load(server.url, merchant);
    await sleep(1500);
    const down = Date.now();
    await cluster.restart(mode);
    const back = Date.now();
    const recoveryMs = await firstSuccessAfter(load, merchant, back);
    await sleep(1500);
    await load.stop();
    await verify(`PostgreSQL ${name}`, merchant, load, {
      database_down_ms: back - down,
      first_success_after_database_ms: recoveryMs,
    });
  });

  it("PostgreSQL stopped for 10 s under load: 503 SU_01 throughout, back without a restart", async () => {
    const merchant = await newMerchant(server.url);
    const load = new Load(server.url, merchant);
    await sleep(1500);
    await cluster.stop("fast");
    const down = Date.now();
    await sleep(10_000);
    await cluster.start();
    const back = Date.now();
    const recoveryMs = await firstSuccessAfter(load, merchant, back);
    await sleep(1500);
    await load.stop();
    const during = load.calls.filter((c) => c.started >= down && c.started + c.ms <= back);
    expect(during.length).toBeGreaterThan(0);
    await verify("PostgreSQL stopped 10 s", merchant, load, {
      database_down_ms: back - down,
      calls_while_down: during.length,
      answers_while_down: countBy(during, kindOf),
      first_success_after_database_ms: recoveryMs,
    });
  });

  it("PostgreSQL frozen (SIGSTOP) for 15 s: calls fail within their timeouts, nothing piles up, recovery after SIGCONT", async () => {
    const merchant = await newMerchant(server.url);
    const load = new Load(server.url, merchant);
    await sleep(1500);
    cluster.freeze();
    const frozen = Date.now();
    let connections = 0;
    let burst: Call[] = [];
    try {
      // A burst far beyond the waiting line's limit: the calls past it must be refused at once.
      await sleep(3000);
      burst = await Promise.all(
        Array.from({ length: 200 }, () => call(server.url, merchant, "create", `b-${randomUUID()}`, undefined, createBody(merchant))),
      );
      await until(
        "15 s of freeze",
        () => {
          connections = Math.max(connections, socketsTo(cluster.port));
          return Date.now() - frozen >= 15_000;
        },
        20_000,
        250,
      );
    } finally {
      cluster.thaw();
    }
    const back = Date.now();
    const recoveryMs = await firstSuccessAfter(load, merchant, back);
    await sleep(1500);
    await load.stop();
    const during = load.calls.filter((c) => c.started >= frozen && c.started + c.ms <= back);
    expect(during.length).toBeGreaterThan(0);
    expect(during.every((c) => c.status === 503)).toBe(true);
    expect(burst.every((c) => c.status === 503 && c.body?.error?.code === "SU_01")).toBe(true);
    expect(Math.max(...burst.map((c) => c.ms))).toBeLessThan(longestCallMs);
    const refusedAtOnce = burst.filter((c) => c.ms < 1000).length;
    // The pool, the delivery thread's three, the key cache's and the event feed's, each perhaps being replaced.
    expect(connections).toBeLessThanOrEqual(2 * (poolSize + 3 + 2));
    load.calls.push(...burst);
    await verify("PostgreSQL frozen 15 s", merchant, load, {
      calls_while_frozen: during.length,
      slowest_call_while_frozen_ms: Math.max(...during.map((c) => c.ms)),
      burst_of_200: countBy(burst, kindOf),
      burst_refused_within_1s: refusedAtOnce,
      burst_slowest_ms: Math.max(...burst.map((c) => c.ms)),
      most_connections_to_database: connections,
      first_success_after_thaw_ms: recoveryMs,
    });
  });

  it("Redis killed under load: limits fail open and nothing else fails; restarted, the shared limit applies again", async () => {
    const merchant = await newMerchant(server.url);
    const limited = await newMerchant(server.url);
    const load = new Load(server.url, merchant);
    await sleep(1500);
    await redis.kill();
    const down = Date.now();
    await sleep(5000);
    // Fail open: a key Redis would count is served while Redis is away.
    const meanwhile = await rest(server.url, "GET", "/payments/list", { apiKey: limited.apiKey });
    expect(meanwhile.status).toBe(200);
    await redis.start();
    const back = Date.now();
    // Redis is empty again: fill the limited key's window in it, and the next call must be refused.
    const counters = redis.client();
    let refusedAfterMs = 0;
    try {
      await until(
        "the rate limit read from Redis again",
        async () => {
          const now = Date.now();
          for (const start of [now - (now % 60_000), now - (now % 60_000) + 60_000]) {
            await counters.set(`ratelimit:${limited.keyId}:${start}`, "1000000", "PX", 120_000);
          }
          const res = await rest(server.url, "GET", "/payments/list", { apiKey: limited.apiKey });
          return res.status === 429 && res.body?.error?.code === "RL_01";
        },
        15_000,
        100,
      );
      refusedAfterMs = Date.now() - back;
    } finally {
      counters.disconnect();
    }
    await load.stop();
    const during = load.calls.filter((c) => c.started >= down && c.started + c.ms <= back);
    expect(during.length).toBeGreaterThan(0);
    expect(load.calls.every((c) => c.status === 200)).toBe(true);
    await verify("Redis killed 5 s", merchant, load, {
      calls_while_down: during.length,
      slowest_call_while_down_ms: Math.max(...during.map((c) => c.ms)),
      limit_applied_again_after_restart_ms: refusedAfterMs,
    });
  });

  it("a webhook receiver that never answers: attempts time out and are retried later, at most the endpoint's cap at once, payments unaffected", async () => {
    const receiver = await startSilentReceiver();
    try {
      const merchant = await newMerchant(server.url);
      await updateProfile(server.url, merchant, { webhook_url: receiver.url });
      const load = new Load(server.url, merchant);
      await until("the first attempts to time out", () => receiver.closedBySender() >= webhookConcurrency, 30_000, 100);
      // A second round of attempts, sent as the first timed out, to see the cap hold across them.
      await sleep(3000);
      await load.stop();
      expect(receiver.mostAttempts()).toBe(webhookConcurrency);
      // undici may open a spare connection beside each one it gave up on; it carries no request and
      // closes after undici's keep-alive timeout (4 s).
      expect(receiver.mostConnections()).toBeLessThanOrEqual(2 * webhookConcurrency);
      expect(receiver.shortestAttempt()).toBeGreaterThanOrEqual(9_000);
      // The outcomes of the attempts are written a moment after they end.
      let tried: JsonBody[] = [];
      await until(
        "the timed-out attempts recorded",
        async () => {
          tried = (await allEvents(server.url, merchant)).filter((e) => e.delivery.attempts > 0);
          return tried.length >= webhookConcurrency;
        },
        10_000,
        100,
      );
      for (const event of tried) {
        expect(event.delivery.status).toBe("pending");
        expect(event.delivery.last_error).toBe("no answer within 10 s");
        const waitMs = Date.parse(event.delivery.next_attempt_at) - Date.parse(event.delivery.last_attempt_at);
        // The attempt's 10 s, then the first retry's 10 s spread by 0.8 to 1.2.
        expect(waitMs).toBeGreaterThanOrEqual(10_000 + 8_000 - 100);
        expect(waitMs).toBeLessThanOrEqual(10_000 + 12_000 + 1_000);
      }
      await verify("webhook receiver never answers", merchant, load, {
        most_attempts_at_once: receiver.mostAttempts(),
        most_connections_at_once: receiver.mostConnections(),
        connections_opened: receiver.opened(),
        shortest_attempt_ms: receiver.shortestAttempt(),
        attempts_timed_out: tried.length,
      });
      expect(figures["webhook receiver never answers"]!.answers).toEqual({ 200: load.calls.length });
    } finally {
      receiver.close();
    }
  });
});

/** Every event of the merchant, page by page (the oldest, sent first, are on the last page). */
async function allEvents(url: string, merchant: TestMerchant): Promise<JsonBody[]> {
  const events: JsonBody[] = [];
  for (let more = true; more; ) {
    const page = await rest(url, "GET", `/events/list?limit=100&offset=${events.length}`, { apiKey: merchant.apiKey });
    expect(page.status, JSON.stringify(page.body)).toBe(200);
    events.push(...page.body.data);
    more = page.body.has_more;
  }
  return events;
}

/** Established TCP connections from this machine to `port` (the server's connections to the cluster). */
function socketsTo(port: number): number {
  const out = execFileSync("ss", ["-Htn", "state", "established", `( dport = :${port} )`], { encoding: "utf8" });
  return out.split("\n").filter((line) => line.trim() !== "").length;
}

/** A receiver that accepts connections and never answers, counting what the sender keeps open. */
interface SilentReceiver {
  readonly url: string;
  /** The most connections carrying a request (bytes received) open at once: attempts in flight. */
  mostAttempts(): number;
  /** The most connections open at once, idle ones included. */
  mostConnections(): number;
  opened(): number;
  closedBySender(): number;
  /** The shortest life of a connection that carried a request. */
  shortestAttempt(): number;
  close(): void;
}

async function startSilentReceiver(): Promise<SilentReceiver> {
  const opened = new Map<Socket, { readonly at: number; request: boolean }>();
  let mostAttempts = 0;
  let mostConnections = 0;
  let count = 0;
  let closed = 0;
  let shortest = Number.POSITIVE_INFINITY;
  const server: Server = createServer((socket) => {
    const connection = { at: Date.now(), request: false };
    count++;
    opened.set(socket, connection);
    socket.on("error", () => undefined);
    socket.on("data", () => {
      connection.request = true;
    });
    socket.on("close", () => {
      opened.delete(socket);
      closed++;
      if (connection.request) shortest = Math.min(shortest, Date.now() - connection.at);
    });
  });
  // Sampled among connections open for half a second: a sender replacing a connection it gave up on
  // opens the next one as the last closes, and the two may reach us in either order.
  const sampler = setInterval(() => {
    const now = Date.now();
    const settled = [...opened.values()].filter((c) => now - c.at >= 500);
    mostConnections = Math.max(mostConnections, settled.length);
    mostAttempts = Math.max(mostAttempts, settled.filter((c) => c.request).length);
  }, 100);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    mostAttempts: () => mostAttempts,
    mostConnections: () => mostConnections,
    opened: () => count,
    closedBySender: () => closed,
    shortestAttempt: () => shortest,
    close() {
      clearInterval(sampler);
      for (const socket of opened.keys()) socket.destroy();
      server.close();
    },
  };
}
