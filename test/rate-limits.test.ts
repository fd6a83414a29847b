import { Code, ConnectError } from "@connectrpc/connect";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sleep } from "./support/wait.js";
import { HealthService } from "../gen/paymentservice/v1/health_pb.js";
import { visaCard as card } from "./support/cards.js";
import { rest, rpcClient, type RestResponse, type RpcProtocol } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { onPostgres } from "./support/database.js";
import { expectExactRestError, expectRestError, expectRpcError } from "./support/errors.js";
import { issueKey, newMerchant, type TestMerchant } from "./support/merchant.js";
import { uniqueId } from "./support/resource-api.js";
import { testRedisUrl } from "./support/redis.js";
import { instancePair, runningService, servicePair } from "./support/running.js";
import { noPolling, startInstance, startService, unreachedLimit, type TestService } from "./support/service.js";

/*
 * Rate limits (decisions §6, interface §8, docs/rate-limits.md): RATE_LIMIT_PER_MINUTE calls per API
 * key in fixed one-minute windows aligned to the clock's minutes. Every response to a merchant key
 * carries X-RateLimit-Limit / -Remaining / -Reset (Unix seconds when the window ends); over the limit
 * the call is refused with 429 RL_01 and Retry-After (Connect/gRPC: resource_exhausted). The admin
 * API is counted per client address instead (test/faults/auth-abuse.fault.ts tests that limit). With REDIS_URL the counters are shared by every instance; without it each
 * instance counts alone; with Redis unreachable the limiter fails open to local counting.
 *
 * Most tests run on the system clock, as in production: a run that straddles a minute boundary sees
 * its count restart, so those tests keep clear of a minute's last seconds and run again (with a
 * fresh key) when their responses report more than one window. One service runs on a TestClock to
 * cross a window's end on purpose.
 */

const windowMs = 60_000;

/** What a response's rate-limit headers say (NaN where a header is missing). */
interface Window {
  readonly limit: number;
  readonly remaining: number;
  readonly reset: number;
}

function windowOf(headers: Headers): Window {
  return {
    limit: Number(headers.get("x-ratelimit-limit") ?? NaN),
    remaining: Number(headers.get("x-ratelimit-remaining") ?? NaN),
    reset: Number(headers.get("x-ratelimit-reset") ?? NaN),
  };
}

const remainingOf = (responses: { headers: Headers }[]) => responses.map((r) => windowOf(r.headers).remaining);

/** Waits out the last seconds of the current minute, so a run started now rarely straddles two windows. */
async function clearOfMinuteEnd(): Promise<void> {
  const left = windowMs - (Date.now() % windowMs);
  if (left < 3000) await sleep(left + 100);
}

/**
 * Runs `attempt` — calls with a fresh key, returning what they answered and the headers of every
 * response — until all those responses fall in one window (one X-RateLimit-Reset), at most three
 * times. A run cut by a minute boundary is run again rather than asserted on.
 */
async function inOneWindow<T extends { headers: Headers[] }>(attempt: () => Promise<T>): Promise<T> {
  for (let run = 1; ; run++) {
    await clearOfMinuteEnd();
    const result = await attempt();
    const resets = new Set(result.headers.map((h) => windowOf(h).reset));
    if (resets.size === 1 || run === 3) return result;
  }
}

/** A timed REST call: the response and the wall-clock instants around it. */
async function timed(call: () => Promise<RestResponse>): Promise<{ res: RestResponse; before: number; after: number }> {
  const before = Date.now();
  const res = await call();
  return { res, before, after: Date.now() };
}

const health = (url: string, apiKey: string) => rest(url, "GET", "/health", { apiKey });

/** Asserts the documented 429: RL_01 body and nothing else, limit and remaining 0, Retry-After until the window ends. */
function expectLimited(res: RestResponse, limit: number, at: { before: number; after: number }): void {
  expectExactRestError(res, 429, "RL_01");
  const window = windowOf(res.headers);
  expect({ limit: window.limit, remaining: window.remaining }).toEqual({ limit, remaining: 0 });
  const retryAfter = Number(res.headers.get("retry-after"));
  expect(Number.isInteger(retryAfter)).toBe(true);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
  // Seconds from the moment of the call to the end of the window, rounded up.
  expect(retryAfter).toBeGreaterThanOrEqual(Math.max(Math.ceil(window.reset - at.after / 1000), 1));
  expect(retryAfter).toBeLessThanOrEqual(Math.max(Math.ceil(window.reset - at.before / 1000), 1));
}

describe("one instance with RATE_LIMIT_PER_MINUTE=5", () => {
  const service = runningService({ ...noPolling, RATE_LIMIT_PER_MINUTE: "5" });

  it("reports the window on every response to a merchant key, success or error: the limit, remaining counting down, reset at the end of the current minute", async () => {
    const { calls, headers } = await inOneWindow(async () => {
      const merchant = await newMerchant(service.url);
      const calls = [
        await timed(() => health(service.url, merchant.apiKey)),
        await timed(() => rest(service.url, "GET", "/payments/pay_doesnotexist", { apiKey: merchant.apiKey })),
        await timed(() => rest(service.url, "POST", "/payments", { apiKey: merchant.apiKey, body: { currency: "USD" } })),
        await timed(() => rest(service.url, "POST", "/customers", { apiKey: merchant.apiKey, body: { name: "Ada" } })),
      ];
      return { calls, headers: calls.map((c) => c.res.headers) };
    });

    expect(calls[0]!.res.status).toBe(200);
    expectRestError(calls[1]!.res, 404, "HE_02");
    expectRestError(calls[2]!.res, 400, "IR_04");
    expect(calls[3]!.res.status).toBe(200);
    expect(remainingOf(calls.map((c) => c.res))).toEqual([4, 3, 2, 1]);
    for (const { res, before, after } of calls) {
      const { limit, reset } = windowOf(res.headers);
      expect(limit).toBe(5);
      expect(Number.isInteger(reset)).toBe(true);
      // The end of the minute the call was counted in: a whole minute, in the future, at most a minute away.
      expect(reset % 60).toBe(0);
      expect(reset * 1000).toBeGreaterThan(before);
      expect(reset * 1000).toBeLessThanOrEqual(after + windowMs);
      expect(res.headers.get("retry-after")).toBeNull();
    }
    expect(new Set(headers.map((h) => windowOf(h).reset)).size).toBe(1);
  });

  it("refuses the call over the limit with 429 RL_01 and Retry-After; it does not run nor claim its idempotency key, and calls over the limit keep being refused", async () => {
    const { merchant, allowed, refused, key, headers } = await inOneWindow(async () => {
      const merchant = await newMerchant(service.url);
      const allowed: RestResponse[] = [];
      for (let i = 0; i < 5; i++)
        allowed.push(await rest(service.url, "POST", "/customers", { apiKey: merchant.apiKey, body: { name: `c${i}` } }));
      const key = uniqueId("limited");
      const refused = [
        await timed(() =>
          rest(service.url, "POST", "/payments", {
            apiKey: merchant.apiKey,
            body: { amount: 1000, currency: "USD", profile_id: merchant.profileId, confirm: true, payment_method_data: { card } },
            headers: { "X-Idempotency-Key": key },
          }),
        ),
        await timed(() => rest(service.url, "POST", "/customers", { apiKey: merchant.apiKey, body: { name: "one too many" } })),
        await timed(() => health(service.url, merchant.apiKey)),
      ];
      return { merchant, allowed, refused, key, headers: [...allowed, ...refused.map((r) => r.res)].map((r) => r.headers) };
    });

    expect(allowed.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(remainingOf(allowed)).toEqual([4, 3, 2, 1, 0]);
    for (const call of refused) expectLimited(call.res, 5, call);
    expect(new Set(headers.map((h) => windowOf(h).reset)).size).toBe(1);

    const [counts] = await service.app.dataSource.query(
      `SELECT (SELECT count(*) FROM customers WHERE merchant_id = $1)::int AS customers,
              (SELECT count(*) FROM payments WHERE merchant_id = $1)::int AS payments,
              (SELECT count(*) FROM idempotency_keys WHERE merchant_id = $1 AND idempotency_key = $2)::int AS keys`,
      [merchant.merchantId, key],
    );
    expect(counts).toEqual({ customers: 5, payments: 0, keys: 0 });
  });

  for (const protocol of ["connect", "grpc", "grpc-web"] as const satisfies readonly RpcProtocol[]) {
    it(`${protocol}: the window in the response headers; over the limit resource_exhausted with the RL_01 detail and the rate-limit headers in the error metadata`, async () => {
      const { successes, failure, headers } = await inOneWindow(async () => {
        const merchant = await newMerchant(service.url);
        const client = rpcClient(HealthService, service.url, protocol, { apiKey: merchant.apiKey });
        const successes: Headers[] = [];
        for (let i = 0; i < 5; i++) {
          const answer = await client.check({}, { onHeader: (h) => successes.push(h) });
          expect(answer.status).toBe("ok");
        }
        const failure: unknown = await client.check({}).then(
          () => undefined,
          (error: unknown) => error,
        );
        return { successes, failure, headers: [...successes, ...(failure instanceof ConnectError ? [failure.metadata] : [])] };
      });

      expect(successes.map((h) => windowOf(h))).toEqual(
        [4, 3, 2, 1, 0].map((remaining) => ({ limit: 5, remaining, reset: windowOf(successes[0]!).reset })),
      );
      await expectRpcError(Promise.reject(failure), Code.ResourceExhausted, "RL_01");
      const metadata = (failure as ConnectError).metadata;
      expect(windowOf(metadata)).toEqual({ limit: 5, remaining: 0, reset: windowOf(successes[0]!).reset });
      const retryAfter = Number(metadata.get("retry-after"));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(new Set(headers.map((h) => windowOf(h).reset)).size).toBe(1);
    });
  }

  it("counts the admin API apart from the keys, per client address (ADMIN_RATE_LIMIT_PER_MINUTE, unreached here): more calls than the key limit all succeed, reporting the admin window", async () => {
    for (let i = 0; i < 8; i++) {
      const res = await rest(service.url, "POST", "/merchants", { admin: true, body: { merchant_name: `Admin ${i}` } });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-ratelimit-limit")).toBe(unreachedLimit);
      expect(res.headers.get("retry-after")).toBeNull();
    }
  });

  it("counts each API key on its own: another secret key and a publishable key of the same merchant keep their full allowance", async () => {
    const { first, second, publishable, firstAgain, headers } = await inOneWindow(async () => {
      const merchant: TestMerchant = await newMerchant(service.url);
      const secondKey = await issueKey(service.url, merchant.merchantId, "sandbox", "secret");
      const publishableKey = await issueKey(service.url, merchant.merchantId, "sandbox", "publishable");
      const first: RestResponse[] = [];
      for (let i = 0; i < 6; i++) first.push(await health(service.url, merchant.apiKey));
      const second = [await health(service.url, secondKey), await health(service.url, secondKey)];
      const publishable = await health(service.url, publishableKey);
      const firstAgain = await health(service.url, merchant.apiKey);
      return { first, second, publishable, firstAgain, headers: [...first, ...second, publishable, firstAgain].map((r) => r.headers) };
    });
    expect(first.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429]);
    expect(remainingOf(first)).toEqual([4, 3, 2, 1, 0, 0]);
    expect(second.map((r) => [r.status, windowOf(r.headers).remaining])).toEqual([
      [200, 4],
      [200, 3],
    ]);
    expect([publishable.status, windowOf(publishable.headers).remaining]).toEqual([200, 4]);
    expectRestError(firstAgain, 429, "RL_01");
    expect(new Set(headers.map((h) => windowOf(h).reset)).size).toBe(1);
  });

  it("does not count a call refused by authentication (401): it carries no rate-limit headers", async () => {
    const unknown = `snd_${"x".repeat(40)}`;
    for (let i = 0; i < 6; i++) {
      const res = await health(service.url, unknown);
      expectRestError(res, 401, "IR_01");
      expect(res.headers.get("x-ratelimit-limit")).toBeNull();
    }
  });
});

describe("the end of a window (RATE_LIMIT_PER_MINUTE=3 on a TestClock)", () => {
  // Ten seconds into a minute, so the window's end is exactly 50 s away.
  const minute = Math.floor(Date.now() / windowMs) * windowMs;
  const clock = new TestClock(new Date(minute + 10_000));
  const service = runningService({ ...noPolling, RATE_LIMIT_PER_MINUTE: "3" }, clock);

  it("serves the key again once the window ends, with a fresh window; the refused calls never took their idempotency key", async () => {
    const merchant = await newMerchant(service.url);
    const reset = (minute + windowMs) / 1000;
    const allowed = [
      await health(service.url, merchant.apiKey),
      await health(service.url, merchant.apiKey),
      await health(service.url, merchant.apiKey),
    ];
    expect(allowed.map((r) => windowOf(r.headers))).toEqual([2, 1, 0].map((remaining) => ({ limit: 3, remaining, reset })));

    const key = uniqueId("after-reset");
    const create = () =>
      rest(service.url, "POST", "/payments", {
        apiKey: merchant.apiKey,
        body: { amount: 1000, currency: "USD", profile_id: merchant.profileId, confirm: true, payment_method_data: { card } },
        headers: { "X-Idempotency-Key": key },
      });
    const refused = await create();
    expectRestError(refused, 429, "RL_01");
    expect(refused.headers.get("retry-after")).toBe("50");
    expect(windowOf(refused.headers)).toEqual({ limit: 3, remaining: 0, reset });

    clock.advance(49_999);
    const lastMoment = await create();
    expectRestError(lastMoment, 429, "RL_01");
    expect(lastMoment.headers.get("retry-after")).toBe("1");

    clock.advance(1);
    const created = await create();
    expect({ status: created.status, replayed: created.headers.get("idempotent-replayed"), payment: created.body.status }).toEqual({
      status: 200,
      replayed: null,
      payment: "succeeded",
    });
    expect(windowOf(created.headers)).toEqual({ limit: 3, remaining: 2, reset: reset + 60 });
    // A replay is a call like any other: it is counted, and carries the window too.
    const replay = await create();
    expect({ replayed: replay.headers.get("idempotent-replayed"), id: replay.body.payment_id }).toEqual({
      replayed: "true",
      id: created.body.payment_id,
    });
    expect(windowOf(replay.headers)).toEqual({ limit: 3, remaining: 1, reset: reset + 60 });
  });
});

describe("with REDIS_URL", () => {
  let service: TestService;
  let redis: Redis;

  beforeAll(async () => {
    redis = new Redis(testRedisUrl, { maxRetriesPerRequest: 1 });
    service = await startService({ ...noPolling, RATE_LIMIT_PER_MINUTE: "4", REDIS_URL: testRedisUrl });
  });
  afterAll(async () => {
    await service?.close();
    redis?.disconnect();
  });

  it("counts in Redis under ratelimit:<key_id>:<window start>, where calls counted by other instances use up this instance's allowance too", async () => {
    const { merchant, calls, headers } = await inOneWindow(async () => {
      const merchant = await newMerchant(service.url);
      const first = await health(service.url, merchant.apiKey);
      const counter = `ratelimit:${merchant.keyId}:${(windowOf(first.headers).reset - 60) * 1000}`;
      const stored = await redis.get(counter);
      const ttl = await redis.pttl(counter);
      // Two calls another instance served in this window.
      await redis.incrby(counter, 2);
      const next = await health(service.url, merchant.apiKey);
      const over = await health(service.url, merchant.apiKey);
      const afterwards = await redis.get(counter);
      return { merchant, calls: { first, stored, ttl, next, over, afterwards }, headers: [first, next, over].map((r) => r.headers) };
    });
    expect(merchant.keyId).toMatch(/^key_/);
    expect(calls.first.status).toBe(200);
    expect(windowOf(calls.first.headers)).toMatchObject({ limit: 4, remaining: 3 });
    expect(calls.stored).toBe("1");
    // The counter goes with its window.
    expect(calls.ttl).toBeGreaterThan(0);
    expect(calls.ttl).toBeLessThanOrEqual(windowMs);
    expect([calls.next.status, windowOf(calls.next.headers).remaining]).toEqual([200, 0]);
    expectRestError(calls.over, 429, "RL_01");
    expect(calls.afterwards).toBe("5");
    expect(new Set(headers.map((h) => windowOf(h).reset)).size).toBe(1);
  });
});

describe("with REDIS_URL unreachable (redis://127.0.0.1:1)", () => {
  let service: TestService;

  beforeAll(async () => {
    // One instance whatever the topology: without Redis each instance counts alone, which is what
    // the test shows; behind a load balancer three would each count a share.
    service = await startInstance({ ...noPolling, RATE_LIMIT_PER_MINUTE: "3", REDIS_URL: "redis://127.0.0.1:1" });
  });
  afterAll(() => service?.close());

  it("fails open: calls still succeed, promptly, with the headers, counted on this instance alone", async () => {
    const { calls, headers } = await inOneWindow(async () => {
      const merchant = await newMerchant(service.url);
      const calls = [
        await timed(() =>
          rest(service.url, "POST", "/payments", {
            apiKey: merchant.apiKey,
            body: { amount: 1000, currency: "USD", profile_id: merchant.profileId, confirm: true, payment_method_data: { card } },
          }),
        ),
        await timed(() => health(service.url, merchant.apiKey)),
        await timed(() => health(service.url, merchant.apiKey)),
        await timed(() => health(service.url, merchant.apiKey)),
      ];
      return { calls, headers: calls.map((c) => c.res.headers) };
    });
    expect(calls[0]!.res.status).toBe(200);
    expect(calls[0]!.res.body.status).toBe("succeeded");
    expect(calls.map((c) => c.res.status)).toEqual([200, 200, 200, 429]);
    expect(remainingOf(calls.map((c) => c.res))).toEqual([2, 1, 0, 0]);
    for (const c of calls) {
      expect(windowOf(c.res.headers).limit).toBe(3);
      // The limiter waits at most 250 ms for Redis; an unreachable one does not hold calls up.
      expect(c.after - c.before).toBeLessThan(2000);
    }
    expect(new Set(headers.map((h) => windowOf(h).reset)).size).toBe(1);
  });
});

describe.skipIf(!onPostgres)("two instances on one database (PostgreSQL only: embedded databases are one per instance)", () => {
  describe("sharing REDIS_URL", () => {
    const { a, b } = servicePair({ ...noPolling, RATE_LIMIT_PER_MINUTE: "6", REDIS_URL: testRedisUrl });

    it("enforce one limit: calls alternating between the instances, exactly 6 of 12 succeed, remaining counting down across both", async () => {
      const { responses } = await inOneWindow(async () => {
        const merchant = await newMerchant(a.url);
        const responses: RestResponse[] = [];
        for (let i = 0; i < 12; i++) responses.push(await health(i % 2 === 0 ? a.url : b.url, merchant.apiKey));
        return { responses, headers: responses.map((r) => r.headers) };
      });
      expect(responses.map((r) => r.status)).toEqual([...Array(6).fill(200), ...Array(6).fill(429)]);
      expect(remainingOf(responses)).toEqual([5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0]);
      for (const res of responses.slice(6)) expectRestError(res, 429, "RL_01");
    });

    it("enforce one limit under concurrency: of 20 simultaneous calls over both instances exactly 6 succeed, each seeing its own count", async () => {
      const { responses } = await inOneWindow(async () => {
        const merchant = await newMerchant(a.url);
        const responses = await Promise.all(Array.from({ length: 20 }, (_, i) => health(i % 2 === 0 ? a.url : b.url, merchant.apiKey)));
        return { responses, headers: responses.map((r) => r.headers) };
      });
      const succeeded = responses.filter((r) => r.status === 200);
      expect(succeeded).toHaveLength(6);
      expect(remainingOf(succeeded).sort()).toEqual([0, 1, 2, 3, 4, 5]);
      for (const res of responses.filter((r) => r.status !== 200)) expectRestError(res, 429, "RL_01");
    });
  });

  describe("without REDIS_URL", () => {
    // Two single instances without Redis whatever the topology (which sets REDIS_URL): the test shows
    // each instance counting alone.
    const { a, b } = instancePair({ ...noPolling, RATE_LIMIT_PER_MINUTE: "3", REDIS_URL: "" });

    it("each instance counts alone (documented: right for one instance only): two instances with a limit of 3 serve 6 calls of one key a minute", async () => {
      const { onA, onB } = await inOneWindow(async () => {
        const merchant = await newMerchant(a.url);
        const onA: RestResponse[] = [];
        const onB: RestResponse[] = [];
        for (let i = 0; i < 4; i++) {
          onA.push(await health(a.url, merchant.apiKey));
          onB.push(await health(b.url, merchant.apiKey));
        }
        return { onA, onB, headers: [...onA, ...onB].map((r) => r.headers) };
      });
      for (const responses of [onA, onB]) {
        expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 429]);
        expect(remainingOf(responses)).toEqual([2, 1, 0, 0]);
      }
    });
  });
});
