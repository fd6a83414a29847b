import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { Redis } from "ioredis";

/** The Redis the rate-limit tests share counters through. */
export const testRedisUrl = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

async function reachable(url: string): Promise<boolean> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 1000, retryStrategy: () => null });
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
 * Makes sure Redis answers at testRedisUrl, starting a local redis-server (installing Debian's
 * package first on a fresh machine, as root like our machines and CI) so `npm test` needs nothing
 * installed beforehand. It keeps nothing on disk.
 */
export async function ensureRedis(): Promise<void> {
  if (await reachable(testRedisUrl)) return;
  const { hostname, port } = new URL(testRedisUrl);
  if (hostname !== "127.0.0.1" && hostname !== "localhost") throw new Error(`Redis at ${testRedisUrl} does not answer`);
  if (!existsSync("/usr/bin/redis-server")) {
    const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
    execFileSync("apt-get", ["update", "-qq"], { env, stdio: "ignore" });
    execFileSync("apt-get", ["install", "-y", "-qq", "redis-server"], { env, stdio: "ignore" });
  }
  execFileSync("/usr/bin/redis-server", ["--daemonize", "yes", "--bind", "127.0.0.1", "--port", port || "6379", "--save", "", "--appendonly", "no"], {
    stdio: "ignore",
  });
  for (let i = 0; i < 50; i++) {
    if (await reachable(testRedisUrl)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`redis-server did not start at ${testRedisUrl}`);
}
