import { randomInt } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, describe, expect, it } from "vitest";
import { HealthService } from "../../gen/paymentservice/v1/health_pb.js";
import { rest, rpcClient, type RestResponse, type RpcProtocol } from "../support/clients.js";
import { TestClock } from "../support/clock.js";
import { onFileDatabase, rows } from "../support/database.js";
import { expectExactRestError, expectRestError, expectRpcError } from "../support/errors.js";
import { newMerchant } from "../support/merchant.js";
import { startRedisServer } from "../support/redis-server.js";
import { instancePair } from "../support/running.js";
import { adminApiKey, noPolling, type TestService } from "../support/service.js";
import { waitUntil } from "../support/wait.js";

/*
 * Failed authentication and the admin API under abuse (issue 18 item 5, docs/rate-limits.md): two
 * instances on one PostgreSQL database, counting in one Redis. A client address that failed
 * AUTH_FAILURE_LIMIT_PER_MINUTE times is answered 429 RL_01 until its window ends, without the
 * database being asked; a key found invalid is remembered for INVALID_KEY_CACHE_SECONDS; admin calls
 * are limited per address. The test's own traffic comes from 127.0.0.1 (setup) and from addresses
 * of 127.0.0.0/8 picked at random per run (the clients under test), so no other file or run shares
 * their counters in the shared Redis.
 *
 * "The database is not asked" is read from PostgreSQL itself: the scans of the api_keys table
 * (pg_stat_user_tables, every key lookup is one) and of every table a request could read. Both
 * instances share one TestClock, so a window ends only when the test says so.
 */

const failureLimit = 20;
const adminLimit = 40;
const invalidKeySeconds = 5;

const limits = {
  ...noPolling,
  AUTH_FAILURE_LIMIT_PER_MINUTE: String(failureLimit),
  ADMIN_RATE_LIMIT_PER_MINUTE: String(adminLimit),
  INVALID_KEY_CACHE_SECONDS: String(invalidKeySeconds),
};

/** Ten seconds into the current minute: a window's end is 50 s of the TestClock away, and never comes by itself. */
function clockInAWindow(): TestClock {
  return new TestClock(new Date(Math.floor(Date.now() / 60_000) * 60_000 + 10_000));
}

const used = new Set<string>(["127.0.0.1"]);

/** An address of 127.0.0.0/8 no other client of this run uses: another client, as far as the service can tell. */
function newClientAddress(): string {
  for (;;) {
    const address = `127.${randomInt(1, 255)}.${randomInt(0, 256)}.${randomInt(1, 255)}`;
    if (!used.has(address)) {
      used.add(address);
      return address;
    }
  }
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/** A well-formed sandbox key no merchant has: authentication must ask the database about it. */
const unknownKey = () => `snd_${Array.from({ length: 40 }, () => base62[randomInt(62)]).join("")}`;

/**
 * Scans of api_keys, and of every table of the file's database but webhook_deliveries (which each
 * instance's webhook dispatcher polls on its own timer, whatever the requests), as PostgreSQL counts them.
 */
async function scans(): Promise<{ apiKeys: number; allTables: number }> {
  const [row] = await onFileDatabase((db) =>
    rows<{ api_keys: string; all_tables: string }>(
      db,
      `SELECT coalesce(sum(seq_scan + coalesce(idx_scan, 0)) FILTER (WHERE relname = 'api_keys'), 0) AS api_keys,
              coalesce(sum(seq_scan + coalesce(idx_scan, 0)) FILTER (WHERE relname <> 'webhook_deliveries'), 0) AS all_tables
         FROM pg_stat_user_tables`,
    ),
  );
  return { apiKeys: Number(row!.api_keys), allTables: Number(row!.all_tables) };
}

/**
 * The scan counts once every backend has reported its own: PostgreSQL 15 publishes a busy backend's
 * table statistics at most every second and an idle one's within 10 s, so the figures are read
 * until they have not moved for 11 s (at most two minutes).
 */
async function settledScans(): Promise<{ apiKeys: number; allTables: number }> {
  let last = await scans();
  let stableSince = Date.now();
  const deadline = Date.now() + 120_000;
  while (Date.now() - stableSince < 11_000) {
    if (Date.now() > deadline) throw new Error(`table statistics still moving after 2 minutes: ${JSON.stringify(last)}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const now = await scans();
    if (now.apiKeys !== last.apiKeys || now.allTables !== last.allTables) {
      last = now;
      stableSince = Date.now();
    }
  }
  return last;
}

const health = (url: string, apiKey: string | undefined, from: string) =>
  rest(url, "GET", "/health", { from, ...(apiKey === undefined ? {} : { apiKey }) });

/** What one call of the flood was answered, over the protocol it used. */
interface Answer {
  readonly via: string;
  readonly status: "unauthenticated" | "limited" | "other";
  readonly detail: string;
}

/** Asserts the documented RL_01 answer of a REST call refused by the failed-authentication limit. */
function expectFailureLimited(res: RestResponse): void {
  expectExactRestError(res, 429, "RL_01", `${failureLimit} failed authentications per minute exceeded for this client address`);
  expect(res.headers.get("x-ratelimit-limit")).toBe(String(failureLimit));
  expect(res.headers.get("x-ratelimit-remaining")).toBe("0");
  const retryAfter = Number(res.headers.get("retry-after"));
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
}

function restAnswer(via: string, res: RestResponse): Answer {
  if (res.status === 401 && res.body?.error?.code === "IR_01") return { via, status: "unauthenticated", detail: "" };
  if (res.status === 429) {
    expectFailureLimited(res);
    return { via, status: "limited", detail: "" };
  }
  return { via, status: "other", detail: `${res.status} ${res.text}` };
}

async function rpcAnswer(via: string, call: Promise<unknown>): Promise<Answer> {
  const error = await call.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  if (!(error instanceof ConnectError)) return { via, status: "other", detail: String(error) };
  if (error.code === Code.Unauthenticated) return { via, status: "unauthenticated", detail: "" };
  if (error.code === Code.ResourceExhausted) {
    await expectRpcError(Promise.reject(error), Code.ResourceExhausted, "RL_01");
    expect(error.metadata.get("x-ratelimit-limit")).toBe(String(failureLimit));
    expect(Number(error.metadata.get("retry-after"))).toBeGreaterThanOrEqual(1);
    return { via, status: "limited", detail: "" };
  }
  return { via, status: "other", detail: `${error.code} ${error.message}` };
}

/** The i-th wrong call from `from`: over REST, Connect and gRPC, with unknown keys, one repeated key, no key or a wrong admin key. */
function wrongCall(i: number, service: TestService, from: string, repeated: string): Promise<Answer> {
  const rpc = (protocol: RpcProtocol, apiKey: string) =>
    rpcAnswer(protocol, rpcClient(HealthService, service.url, protocol, { apiKey, from }).check({}));
  switch (i % 6) {
    case 0:
      return health(service.url, unknownKey(), from).then((res) => restAnswer("rest unknown key", res));
    case 1:
      return rest(service.url, "POST", "/payments", { apiKey: repeated, from, body: { amount: 100, currency: "USD" } }).then((res) =>
        restAnswer("rest repeated key", res),
      );
    case 2:
      return rpc("connect", unknownKey());
    case 3:
      return rpc("grpc", unknownKey());
    case 4:
      return health(service.url, undefined, from).then((res) => restAnswer("rest no key", res));
    default:
      return rest(service.url, "GET", "/merchants/mer_x", { from, headers: { "admin-api-key": `${adminApiKey}-guess-${i}` } }).then((res) =>
        restAnswer("rest wrong admin key", res),
      );
  }
}

/** Sends `count` wrong calls from `from`, `concurrency` at a time, alternating the instances. */
async function flood(
  count: number,
  concurrency: number,
  instances: readonly TestService[],
  from: string,
  repeated: string,
): Promise<Answer[]> {
  const answers: Answer[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        answers.push(await wrongCall(i, instances[i % instances.length]!, from, repeated));
      }
    }),
  );
  return answers;
}

const tally = (answers: readonly Answer[]) => ({
  unauthenticated: answers.filter((a) => a.status === "unauthenticated").length,
  limited: answers.filter((a) => a.status === "limited").length,
  other: answers.filter((a) => a.status === "other").map((a) => `${a.via}: ${a.detail}`),
});

/*
 * Single instances whatever TEST_TOPOLOGY says: these tests count what reaches each instance's
 * database (a load balancer's health checks would move those statistics) and which address each
 * instance counts a call under. A Redis of the file's own: the failure counters of the shared one
 * may hold other files' wrong keys from 127.0.0.1 in the same minute.
 */
const redis = await startRedisServer();
afterAll(() => redis.destroy());

describe("two instances on one database, counting in Redis", () => {
  const clock = clockInAWindow();
  const { a, b } = instancePair({ ...limits, REDIS_URL: redis.url }, clock);

  it("limits a flood of wrong keys per address: 20 failures answered 401, then 1,000 calls answered 429 RL_01 without a key lookup in the database, while other addresses are served; the window's end lifts it", async () => {
    const merchant = await newMerchant(a.url);
    const attacker = newClientAddress();
    const neighbour = newClientAddress();
    const repeated = unknownKey();

    const start = await settledScans();
    // Up to the limit, every failure is an answer from the database: distinct unknown keys, alternating the instances.
    const allowed: Answer[] = [];
    for (let i = 0; i < failureLimit; i++) {
      const service = i % 2 === 0 ? a : b;
      allowed.push(
        i % 4 === 3
          ? await rpcAnswer("connect", rpcClient(HealthService, service.url, "connect", { apiKey: unknownKey(), from: attacker }).check({}))
          : restAnswer("rest", await health(service.url, unknownKey(), attacker)),
      );
    }
    expect(tally(allowed)).toEqual({ unauthenticated: failureLimit, limited: 0, other: [] });
    // Straight on (the counters in Redis expire a real minute after the first failure, whatever the
    // TestClock says), and measured together with the failures before: those are exactly 20 lookups.
    const floodStarted = Date.now();
    const answers = await flood(1000, 20, [a, b], attacker, repeated);
    const floodSeconds = (Date.now() - floodStarted) / 1000;
    const floodTally = tally(answers);
    const afterFlood = await settledScans();

    // Another client is served meanwhile, on both instances, and its own failures are its own.
    const neighbourCalls = [await health(a.url, merchant.apiKey, neighbour), await health(b.url, merchant.apiKey, neighbour)];
    const neighbourRpc = await rpcClient(HealthService, b.url, "connect", { apiKey: merchant.apiKey, from: neighbour }).check({});
    const neighbourWrong = await health(a.url, unknownKey(), neighbour);
    // A key an instance can vouch for without the database (its key cache, filled just before by the
    // neighbour's call, while the cache is known current) is served even from the refused address.
    const vouched = await waitUntil(
      async () => {
        await health(a.url, merchant.apiKey, neighbour);
        return health(a.url, merchant.apiKey, attacker);
      },
      (res) => res.status === 200,
      20,
    );

    // Still refused 49 s later; the window's end (both instances share the clock) lets the address try again.
    clock.advance(49_000);
    const lastSecond = await health(b.url, unknownKey(), attacker);
    clock.advance(1_000);
    const afterWindow = [await health(a.url, unknownKey(), attacker), await health(b.url, merchant.apiKey, attacker)];

    // Each failure before the limit was one lookup of a distinct unknown key: whatever the flood adds is beyond them.
    const figures = {
      failuresBeforeTheLimit: allowed.length,
      floodSent: answers.length,
      floodLimited: floodTally.limited,
      floodUnauthenticated: floodTally.unauthenticated,
      floodSeconds,
      keyLookupsBeforeAndDuringFlood: afterFlood.apiKeys - start.apiKeys,
      keyLookupsDuringFlood: afterFlood.apiKeys - start.apiKeys - failureLimit,
      tableScansBeforeAndDuringFlood: afterFlood.allTables - start.allTables,
    };
    console.log(`auth-abuse flood (Redis, two instances): ${JSON.stringify(figures)}`);

    expect(floodTally).toEqual({ unauthenticated: 0, limited: 1000, other: [] });
    expect(figures.keyLookupsBeforeAndDuringFlood).toBe(failureLimit);
    // Not a scan of any table a request reads, beyond those 20 of api_keys.
    expect(figures.tableScansBeforeAndDuringFlood).toBe(failureLimit);

    expect(neighbourCalls.map((r) => r.status)).toEqual([200, 200]);
    expect(neighbourRpc.status).toBe("ok");
    expectRestError(neighbourWrong, 401, "IR_01");
    expect(vouched.status).toBe(200);
    expectFailureLimited(lastSecond);
    expect(lastSecond.headers.get("retry-after")).toBe("1");
    expectRestError(afterWindow[0]!, 401, "IR_01");
    expect(afterWindow[1]!.status).toBe(200);
  });

  it("remembers an invalid key for INVALID_KEY_CACHE_SECONDS: repeating it costs one lookup per instance per period, and a revocation still fails the very next call everywhere", async () => {
    const merchant = await newMerchant(a.url);
    const client = newClientAddress();
    const wrong = unknownKey();

    const start = await settledScans();
    const repeats: RestResponse[] = [];
    for (let i = 0; i < 8; i++) repeats.push(await health(i % 2 === 0 ? a.url : b.url, wrong, client));
    const afterRepeats = await settledScans();
    clock.advance(invalidKeySeconds * 1000);
    const afterPeriod = await health(a.url, wrong, client);
    const end = await settledScans();

    console.log(
      `auth-abuse invalid-key cache: ${JSON.stringify({ repeats: repeats.length, keyLookups: afterRepeats.apiKeys - start.apiKeys, lookupsAfterThePeriod: end.apiKeys - afterRepeats.apiKeys })}`,
    );
    for (const res of [...repeats, afterPeriod]) expectRestError(res, 401, "IR_01");
    expect(afterRepeats.apiKeys - start.apiKeys).toBe(2);
    expect(end.apiKeys - afterRepeats.apiKeys).toBe(1);

    // Valid keys are never remembered as invalid, nor invalid ones as valid: revoked, it fails at once on both instances.
    expect([(await health(a.url, merchant.apiKey, client)).status, (await health(b.url, merchant.apiKey, client)).status]).toEqual([
      200, 200,
    ]);
    const revoked = await rest(a.url, "DELETE", `/api-keys/${merchant.keyId}/revoke`, { apiKey: merchant.apiKey });
    expect(revoked.status).toBe(200);
    for (const url of [b.url, a.url, b.url]) {
      expectExactRestError(await health(url, merchant.apiKey, client), 401, "IR_01", "This API key has been revoked");
    }
  });

  it("limits the admin API per address: 40 calls over both instances, then 429 RL_01 with Retry-After, while another address is served; wrong admin keys use up the failure limit, after which even the right key is refused", async () => {
    const merchant = await newMerchant(a.url);
    const operator = newClientAddress();
    const retrieve = (url: string, from: string, key = adminApiKey) =>
      rest(url, "GET", `/merchants/${merchant.merchantId}`, { from, headers: { "admin-api-key": key } });

    const calls: RestResponse[] = [];
    for (let i = 0; i <= adminLimit; i++) calls.push(await retrieve(i % 2 === 0 ? a.url : b.url, operator));
    expect(calls.slice(0, adminLimit).map((r) => r.status)).toEqual(Array(adminLimit).fill(200));
    expect(calls.slice(0, adminLimit).map((r) => Number(r.headers.get("x-ratelimit-remaining")))).toEqual(
      Array.from({ length: adminLimit }, (_, i) => adminLimit - 1 - i),
    );
    const over = calls[adminLimit]!;
    expectExactRestError(over, 429, "RL_01", `${adminLimit} admin API requests per minute exceeded for this client address`);
    expect(Number(over.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(over.headers.get("x-ratelimit-limit")).toBe(String(adminLimit));
    expect((await retrieve(b.url, newClientAddress())).status).toBe(200);

    // Guessing the admin key: 20 wrong guesses are 401, then the address is refused whatever it sends.
    const guesser = newClientAddress();
    const guesses: RestResponse[] = [];
    for (let i = 0; i < failureLimit; i++) guesses.push(await retrieve(i % 2 === 0 ? a.url : b.url, guesser, `guess-${i}`));
    for (const res of guesses) expectExactRestError(res, 401, "IR_01", "Invalid admin API key");
    expectFailureLimited(await retrieve(a.url, guesser, "guess-again"));
    expectFailureLimited(await retrieve(b.url, guesser));
    console.log(
      `auth-abuse admin API: ${JSON.stringify({ limit: adminLimit, served: calls.filter((r) => r.status === 200).length, refused: calls.filter((r) => r.status === 429).length, wrongKeyGuessesBeforeRefusal: guesses.length })}`,
    );
  });
});

describe("without Redis, and with Redis unreachable", () => {
  const clock = clockInAWindow();
  const { a, b } = instancePair({ ...limits, REDIS_URL: "" }, clock);
  const unreachable = instancePair({ ...limits, REDIS_URL: "redis://127.0.0.1:1" }, clock);

  it("without REDIS_URL each instance counts an address's failures alone (documented: right for one instance), still without asking the database once over", async () => {
    const attacker = newClientAddress();
    const repeated = unknownKey();
    const onA = await flood(failureLimit, 4, [a], attacker, repeated);
    expect(tally(onA)).toEqual({ unauthenticated: failureLimit, limited: 0, other: [] });
    const before = await settledScans();
    const overOnA = await flood(200, 10, [a], attacker, repeated);
    const after = await settledScans();
    const onB = await health(b.url, unknownKey(), attacker);
    console.log(
      `auth-abuse without Redis: ${JSON.stringify({ sentToA: overOnA.length, limited: tally(overOnA).limited, keyLookups: after.apiKeys - before.apiKeys })}`,
    );
    expect(tally(overOnA)).toEqual({ unauthenticated: 0, limited: 200, other: [] });
    expect(after.apiKeys - before.apiKeys).toBe(0);
    expectRestError(onB, 401, "IR_01");
  });

  it("with Redis unreachable fails open to counting on each instance: the limit still holds there", async () => {
    const attacker = newClientAddress();
    const answers = await flood(failureLimit + 10, 1, [unreachable.a], attacker, unknownKey());
    expect(tally(answers)).toEqual({ unauthenticated: failureLimit, limited: 10, other: [] });
    const merchant = await newMerchant(unreachable.a.url);
    expect((await health(unreachable.b.url, merchant.apiKey, newClientAddress())).status).toBe(200);
  });
});
