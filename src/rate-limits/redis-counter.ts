import { Redis } from "ioredis";
import { log } from "../log.js";
import { answerWithin } from "./answer-within.js";
import type { WindowCounter } from "./counter.js";

/** INCR and, for a window's first request, its expiry: one atomic step however many instances count. */
const incrementScript = `local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n`;

/** How long a rate-limit check may wait for Redis before the request goes ahead without it. */
const answerWithinMs = 250;

/**
 * How long ioredis keeps a command Redis has not answered: a frozen Redis would otherwise hold every
 * one of them, long after its request went ahead without it (answerWithinMs).
 */
const forgetAfterMs = 5_000;

/** How often an unreachable Redis is logged while it stays unreachable. */
const warnEveryMs = 30_000;

/**
 * Counters shared through Redis (REDIS_URL), so every instance enforces one limit. When Redis does
 * not answer, requests are counted by `fallback` (this instance only) instead of failing: a rate
 * limiter outage must not stop payments (issue 6, fail open), and it is logged and counted.
 */
export class RedisCounter implements WindowCounter {
  private readonly redis: Redis;
  private lastWarning = 0;

  constructor(
    url: string,
    private readonly fallback: WindowCounter,
    /** Told of each request counted by the fallback (the fallback metric). */
    private readonly fellBack: () => void = () => undefined,
  ) {
    this.redis = new Redis(url, {
      lazyConnect: false,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: forgetAfterMs,
      connectTimeout: 1000,
      retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
    });
    this.redis.on("error", (error: Error) => this.warn(error));
    this.redis.defineCommand("incrementWindow", { numberOfKeys: 1, lua: incrementScript });
  }

  async increment(key: string, windowMs: number): Promise<number> {
    try {
      const run = (this.redis as unknown as { incrementWindow(key: string, ms: number): Promise<number> }).incrementWindow;
      return await answerWithin(run.call(this.redis, `ratelimit:${key}`, windowMs), answerWithinMs, "Redis");
    } catch (error) {
      this.warn(error);
      this.fellBack();
      return this.fallback.increment(key, windowMs);
    }
  }

  async current(key: string): Promise<number> {
    try {
      return Number((await answerWithin(this.redis.get(`ratelimit:${key}`), answerWithinMs, "Redis")) ?? 0);
    } catch (error) {
      this.warn(error);
      return this.fallback.current(key);
    }
  }

  private warn(error: unknown): void {
    const now = Date.now();
    if (now - this.lastWarning < warnEveryMs) return;
    this.lastWarning = now;
    log.error("rate limit counters unavailable, counting on this instance only", { error: String(error) });
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}
