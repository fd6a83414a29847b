import { getOption, type DescMethod } from "@bufbuild/protobuf";
import { card_testing_limited as cardTestingLimited } from "../../gen/paymentservice/v1/options_pb.js";
import type { ConnectError } from "@connectrpc/connect";
import type { Authenticate, HeaderLookup } from "../auth/authenticate.js";
import type { Caller } from "../auth/caller.js";
import { serviceUnavailable } from "../errors.js";
import { LimitExceeded, rateLimitHeaders, type RateLimiter } from "../rate-limits/limiter.js";
import { documentedError } from "./errors.js";

/** A call allowed to run: who makes it, and the headers every answer to it carries. */
export interface Admitted {
  /** Undefined for a public method (reflection). */
  readonly caller: Caller | undefined;
  /** The X-RateLimit headers of the caller's key (or, for the admin, of its address). */
  readonly header: readonly [string, string][];
}

/** Decides whether a call of `method` from `client` (its counted address) may run, from its headers; throws the documented error if not. */
export type Admit = (method: DescMethod, header: HeaderLookup, client: string) => Promise<Admitted>;

/** What admission needs: authentication, the rate limits, and which methods anyone may call. */
export interface AdmissionDependencies {
  readonly authenticate: Authenticate;
  /** Per merchant API key (RATE_LIMIT_PER_MINUTE). */
  readonly rateLimiter: RateLimiter;
  /** Admin API calls per client address (ADMIN_RATE_LIMIT_PER_MINUTE). */
  readonly adminLimiter: RateLimiter;
  /** Card tokenizations and confirmations with a publishable key per client address (CARD_TESTING_LIMIT_PER_MINUTE). */
  readonly cardTestingLimiter: RateLimiter;
  isPublic(method: DescMethod): boolean;
  /**
   * Whether as many calls as may wait for a database connection already do (DATABASE_MAX_WAITING):
   * while the database does not answer, calls then fail at once instead of piling up.
   */
  databaseSaturated(): boolean;
}

/**
 * Admits or refuses a call from its headers alone, before a byte of its body is read, on every
 * protocol: authentication by the method's access rule (401 IR_01, 403 IR_22, or 429 RL_01 once the
 * address used up its failed authentications), then the key's rate limit, or the admin's per
 * address (429 RL_01), and a publishable key's card tokenizations and confirmations per address
 * (429 RL_01, decisions §10: card testing). So a key that may not call a method is refused whatever the body holds, the
 * body of a refused call is never parsed, and every answer to an authenticated call — including one
 * refused later for its body — carries the X-RateLimit headers (decisions §6).
 * While the database's waiting line is full, every call but a public one is refused first (503
 * SU_01), since authenticating it would join that line.
 */
export function createAdmission(deps: AdmissionDependencies): Admit {
  // Options are decoded from the descriptor on each getOption call; whether a method is limited never changes.
  const limited = new WeakMap<DescMethod, boolean>();
  const cardTestingLimitedOf = (method: DescMethod): boolean => {
    let isLimited = limited.get(method);
    if (isLimited === undefined) {
      isLimited = getOption(method, cardTestingLimited);
      limited.set(method, isLimited);
    }
    return isLimited;
  };
  return async (method, header, client) => {
    if (deps.isPublic(method)) return { caller: undefined, header: [] };
    if (deps.databaseSaturated()) throw serviceUnavailable();
    const caller = await deps.authenticate(method, header, client).catch((error: unknown) => {
      throw error instanceof LimitExceeded ? limitRefusal(error) : error;
    });
    const limiter = caller.kind === "merchant" ? deps.rateLimiter : deps.adminLimiter;
    const state = await limiter.take(caller.kind === "merchant" ? caller.keyId : client);
    if (!state.allowed) throw limitRefusal(limiter.refusal(state));
    if (caller.kind === "merchant" && caller.publishable && cardTestingLimitedOf(method)) {
      const tried = await deps.cardTestingLimiter.take(client);
      if (!tried.allowed) throw limitRefusal(deps.cardTestingLimiter.refusal(tried));
    }
    return { caller, header: rateLimitHeaders(state) };
  };
}

/** The documented RL_01 answer, with the window's X-RateLimit headers and Retry-After. */
function limitRefusal(exceeded: LimitExceeded): ConnectError {
  const refusal = documentedError(exceeded.error);
  for (const [name, value] of rateLimitHeaders(exceeded.state)) refusal.metadata.set(name, value);
  return refusal;
}
