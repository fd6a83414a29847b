import { describe, expect, it } from "vitest";
import { LimitExceeded, RateLimiter } from "./limiter.js";
import { AuthFailureLimiter } from "./auth-failures.js";
import { MemoryCounter } from "./counter.js";

/*
 * The failed-authentication limit of a client address: its first N failures are answered as they
 * are (401); from the N+1th, and for every check until the window ends, RL_01 with the window.
 */

function limiterAt(start: number, limit: number) {
  let now = start;
  const clock = { now: () => new Date(now) };
  const counter = new MemoryCounter(() => now);
  const failures = new AuthFailureLimiter(new RateLimiter(limit, counter, clock, "failed_authentication"), clock);
  return { failures, counter, advance: (ms: number) => (now += ms) };
}

const refusalOf = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (error: unknown) => error,
  );

describe("AuthFailureLimiter", () => {
  const minute = 1_800_000_000_000 - (1_800_000_000_000 % 60_000);

  it("lets an address fail N times, then refuses its checks and further failures until its window ends", async () => {
    const { failures, counter, advance } = limiterAt(minute + 10_000, 3);
    for (let i = 0; i < 3; i++) {
      expect(await refusalOf(failures.check("192.0.2.1"))).toBeUndefined();
      expect(await failures.failed("192.0.2.1")).toBeUndefined();
    }
    const refused = await refusalOf(failures.check("192.0.2.1"));
    expect(refused).toBeInstanceOf(LimitExceeded);
    expect((refused as LimitExceeded).error.code).toBe("RL_01");
    expect((refused as LimitExceeded).error.message).toBe(
      "Rate limit of 3 failed authentications per minute exceeded for this client address; retry after 50 s",
    );
    expect((refused as LimitExceeded).state).toEqual({
      allowed: false,
      limit: 3,
      remaining: 0,
      reset: (minute + 60_000) / 1000,
      retryAfter: 50,
    });
    expect((await failures.failed("192.0.2.1"))?.state.retryAfter).toBe(50);
    // Once refused, it is remembered here: the shared counter is neither read nor written again.
    expect(await counter.current(`authfail:192.0.2.1:${minute}`)).toBe(3);
    // Another address is not affected.
    expect(await refusalOf(failures.check("192.0.2.2"))).toBeUndefined();

    advance(49_001);
    expect(((await refusalOf(failures.check("192.0.2.1"))) as LimitExceeded).state.retryAfter).toBe(1);
    advance(999);
    expect(await refusalOf(failures.check("192.0.2.1"))).toBeUndefined();
  });

  it("refuses the N+1th failure itself with RL_01 rather than 401", async () => {
    const { failures } = limiterAt(minute, 2);
    expect(await failures.failed("192.0.2.9")).toBeUndefined();
    expect(await failures.failed("192.0.2.9")).toBeUndefined();
    const over = await failures.failed("192.0.2.9");
    expect(over?.state).toMatchObject({ allowed: false, limit: 2, remaining: 0, retryAfter: 60 });
  });
});
