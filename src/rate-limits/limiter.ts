import type { Clock } from "../clock.js";
import type { WindowCounter } from "./counter.js";

/** Fixed windows of one minute, aligned to the clock's minutes so every instance agrees on them. */
const windowMs = 60_000;

/** Where a key stands in the current window, as the X-RateLimit headers report it. */
export interface RateLimitState {
  readonly allowed: boolean;
  readonly limit: number;
  readonly remaining: number;
  /** Unix seconds when the window ends. */
  readonly reset: number;
  /** Seconds until then, at least 1 (Retry-After). */
  readonly retryAfter: number;
}

/** The X-RateLimit headers reporting a window (decisions §6), with Retry-After once it is used up. */
export function rateLimitHeaders(state: RateLimitState): [string, string][] {
  const headers: [string, string][] = [
    ["x-ratelimit-limit", String(state.limit)],
    ["x-ratelimit-remaining", String(state.remaining)],
    ["x-ratelimit-reset", String(state.reset)],
  ];
  if (!state.allowed) headers.push(["retry-after", String(state.retryAfter)]);
  return headers;
}

/** The per-key limit of decisions §6: RATE_LIMIT_PER_MINUTE requests per fixed minute. */
export class RateLimiter {
  constructor(
    private readonly limit: number,
    private readonly counter: WindowCounter,
    private readonly clock: Clock,
  ) {}

  /** Counts one request of the key and says whether it is within the limit. */
  async take(keyId: string): Promise<RateLimitState> {
    const now = this.clock.now().getTime();
    const windowStart = now - (now % windowMs);
    const count = await this.counter.increment(`${keyId}:${windowStart}`, windowMs);
    const resetMs = windowStart + windowMs;
    return {
      allowed: count <= this.limit,
      limit: this.limit,
      remaining: Math.max(this.limit - count, 0),
      reset: Math.floor(resetMs / 1000),
      retryAfter: Math.max(Math.ceil((resetMs - now) / 1000), 1),
    };
  }

  async close(): Promise<void> {
    await this.counter.close();
  }
}
