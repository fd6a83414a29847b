import type { Clock } from "../clock.js";
import type { LimitExceeded, RateLimiter, RateLimitState } from "./limiter.js";

/** Addresses remembered as refused at most; beyond that the expired ones go, then the oldest. */
const maxRemembered = 10_000;

/**
 * The failed-authentication limit of a client address (AUTH_FAILURE_LIMIT_PER_MINUTE): once an
 * address has failed that many times in a window, every call from it that would need the database
 * (or a comparison with the admin key) to authenticate is refused with RL_01 until the window ends,
 * so a flood of wrong keys costs a counter read and nothing more. The counts are shared like the
 * key limit's (Redis when configured); an address this instance has seen refused is remembered
 * here until its window ends, so a flood it keeps sending costs not even the counter read.
 */
export class AuthFailureLimiter {
  /** Client address → the refused window, until it ends. */
  private readonly refused = new Map<string, RateLimitState>();

  constructor(
    private readonly limiter: RateLimiter,
    private readonly clock: Clock,
  ) {}

  /** Throws the RL_01 refusal when the address has used up its failures of this window. */
  async check(client: string): Promise<void> {
    const remembered = this.remembered(client);
    if (remembered !== undefined) throw this.limiter.refusal(remembered);
    const state = await this.limiter.peek(client);
    if (!state.allowed) {
      this.remember(client, state);
      throw this.limiter.refusal(state);
    }
  }

  /** Counts a failed authentication; returns the RL_01 refusal to answer instead of 401 once over the limit. */
  async failed(client: string): Promise<LimitExceeded | undefined> {
    const remembered = this.remembered(client);
    if (remembered !== undefined) return this.limiter.refusal(remembered);
    const state = await this.limiter.take(client);
    if (state.allowed) return undefined;
    this.remember(client, state);
    return this.limiter.refusal(state);
  }

  /** The refused window of the address, with Retry-After counted from now, while it lasts. */
  private remembered(client: string): RateLimitState | undefined {
    const state = this.refused.get(client);
    if (state === undefined) return undefined;
    const now = this.clock.now().getTime();
    const left = state.reset * 1000 - now;
    if (left <= 0) {
      this.refused.delete(client);
      return undefined;
    }
    return { ...state, allowed: false, remaining: 0, retryAfter: Math.max(Math.ceil(left / 1000), 1) };
  }

  private remember(client: string, state: RateLimitState): void {
    if (this.refused.size >= maxRemembered) {
      const now = this.clock.now().getTime();
      for (const [address, kept] of this.refused) if (kept.reset * 1000 <= now) this.refused.delete(address);
      if (this.refused.size >= maxRemembered) this.refused.delete(this.refused.keys().next().value!);
    }
    this.refused.set(client, state);
  }
}
