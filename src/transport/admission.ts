import type { DescMethod } from "@bufbuild/protobuf";
import type { Authenticate, HeaderLookup } from "../auth/authenticate.js";
import type { Caller } from "../auth/caller.js";
import { rateLimited, serviceUnavailable } from "../errors.js";
import { rateLimitHeaders, type RateLimiter } from "../rate-limits/limiter.js";
import { documentedError } from "./errors.js";

/** A call allowed to run: who makes it, and the headers every answer to it carries. */
export interface Admitted {
  /** Undefined for a public method (reflection). */
  readonly caller: Caller | undefined;
  /** The X-RateLimit headers of the caller's key. */
  readonly header: readonly [string, string][];
}

/** Decides whether a call of `method` may run, from its headers; throws the documented error if not. */
export type Admit = (method: DescMethod, header: HeaderLookup) => Promise<Admitted>;

/** What admission needs: authentication, the rate limiter, and which methods anyone may call. */
export interface AdmissionDependencies {
  readonly authenticate: Authenticate;
  readonly rateLimiter: RateLimiter;
  isPublic(method: DescMethod): boolean;
  /**
   * Whether as many calls as may wait for a database connection already do (DATABASE_MAX_WAITING):
   * while the database does not answer, calls then fail at once instead of piling up.
   */
  databaseSaturated(): boolean;
}

/**
 * Admits or refuses a call from its headers alone, before a byte of its body is read, on every
 * protocol: authentication by the method's access rule (401 IR_01, 403 IR_22), then the key's rate
 * limit (429 RL_01). So a key that may not call a method is refused whatever the body holds, the
 * body of a refused call is never parsed, and every answer to an authenticated merchant call —
 * including one refused later for its body — carries the X-RateLimit headers (decisions §6). The
 * admin API is not limited. While the database's waiting line is full, every call but a public one
 * is refused first (503 SU_01), since authenticating it would join that line.
 */
export function createAdmission(deps: AdmissionDependencies): Admit {
  return async (method, header) => {
    if (deps.isPublic(method)) return { caller: undefined, header: [] };
    if (deps.databaseSaturated()) throw serviceUnavailable();
    const caller = await deps.authenticate(method, header);
    if (caller.kind !== "merchant") return { caller, header: [] };
    const state = await deps.rateLimiter.take(caller.keyId);
    const limitHeader = rateLimitHeaders(state);
    if (!state.allowed) {
      const refusal = documentedError(rateLimited(state.limit, state.retryAfter));
      for (const [name, value] of limitHeader) refusal.metadata.set(name, value);
      throw refusal;
    }
    return { caller, header: limitHeader };
  };
}
