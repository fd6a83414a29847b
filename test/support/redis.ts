import { Redis } from "ioredis";

/** The Redis the rate-limit tests share counters through. */
export const testRedisUrl = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/** Whether a Redis answers PING at `url` within a second; never throws. */
export async function answersPing(url: string): Promise<boolean> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 1000, retryStrategy: () => null });
  redis.on("error", () => undefined);
  try {
    await redis.connect();
    return (await redis.ping()) === "PONG";
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

/**
 * Fails the run at once, with what to do, when Redis does not answer at testRedisUrl: installing and
 * starting it is the machine's preparation (.ci/prepare), not the tests' business.
 */
export async function expectRedis(): Promise<void> {
  if (await answersPing(testRedisUrl)) return;
  throw new Error(
    `Redis does not answer at ${testRedisUrl} (the rate-limit tests share counters through it). ` +
      "Run `bash .ci/prepare` first: it installs Redis if needed and starts it on 127.0.0.1:6379.",
  );
}
