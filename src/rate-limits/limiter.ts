import type { Clock } from "../clock.js";
import { type ApiError, type LimitedCounter, rateLimited } from "../errors.js";
import type { WindowCounter } from "./counter.js";

/** Where each limit's counters live, so an address never meets a key id (`key_…`) in the counters. */
const counterPrefix: Record<LimitedCounter, string> = {
  api_key: "",
  failed_authentication: "authfail:",
  admin: "admin:",
  card_testing: "cardtest:",
};

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

/**
 * A call refused by a limit before it ran: the RL_01 error and the window its headers report. Thrown
 * by authentication (failed-authentication limit), which knows nothing of transports; admission
 * turns it into the documented answer.
 */
export class LimitExceeded extends Error {
  constructor(
    readonly error: ApiError,
    readonly state: RateLimitState,
  ) {
    super(error.message);
    this.name = "LimitExceeded";
  }
}

/**
 * A limit of requests per fixed minute per counted name: an API key (RATE_LIMIT_PER_MINUTE, decisions
 * §6), a client address's failed authentications, its admin calls, or its card tokenizations and
 * confirmations with a publishable key.
 */
export class RateLimiter {
  constructor(
    private readonly limit: number,
    private readonly counter: WindowCounter,
    private readonly clock: Clock,
    private readonly counts: LimitedCounter = "api_key",
  ) {}

  /** Counts one request of the key and says whether it is within the limit. */
  async take(key: string): Promise<RateLimitState> {
    const now = this.clock.now().getTime();
    const windowStart = now - (now % windowMs);
    return this.state(await this.counter.increment(this.counterKey(key, windowStart), windowMs), now, windowStart);
  }

  /** Says whether one more request of the key would be within the limit, without counting anything. */
  async peek(key: string): Promise<RateLimitState> {
    const now = this.clock.now().getTime();
    const windowStart = now - (now % windowMs);
    return this.state((await this.counter.current(this.counterKey(key, windowStart))) + 1, now, windowStart);
  }

  /** The RL_01 refusal of a call over this limit, with its window. */
  refusal(state: RateLimitState): LimitExceeded {
    return new LimitExceeded(rateLimited(state.limit, state.retryAfter, this.counts), state);
  }

  private counterKey(key: string, windowStart: number): string {
    return `${counterPrefix[this.counts]}${key}:${windowStart}`;
  }

  private state(count: number, now: number, windowStart: number): RateLimitState {
    const resetMs = windowStart + windowMs;
    return {
      allowed: count <= this.limit,
      limit: this.limit,
      remaining: Math.max(this.limit - count, 0),
      reset: Math.floor(resetMs / 1000),
      retryAfter: Math.max(Math.ceil((resetMs - now) / 1000), 1),
    };
  }
}
