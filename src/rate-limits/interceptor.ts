import type { Interceptor } from "@connectrpc/connect";
import { callerKey } from "../auth/caller.js";
import { ApiError } from "../errors.js";
import { toConnectError } from "../transport/errors.js";
import type { RateLimiter, RateLimitState } from "./limiter.js";

function headersOf(state: RateLimitState): [string, string][] {
  const headers: [string, string][] = [
    ["x-ratelimit-limit", String(state.limit)],
    ["x-ratelimit-remaining", String(state.remaining)],
    ["x-ratelimit-reset", String(state.reset)],
  ];
  if (!state.allowed) headers.push(["retry-after", String(state.retryAfter)]);
  return headers;
}

/**
 * Counts every call of a merchant key (the admin API is not limited) and reports the window on the
 * response, success or error, on every protocol: response headers for REST and Connect, headers or
 * trailers for gRPC. Over the limit the call is refused with RL_01 (429, resource_exhausted) before
 * it runs.
 */
export function createRateLimitInterceptor(limiter: RateLimiter): Interceptor {
  return (next) => async (req) => {
    const caller = req.contextValues.get(callerKey);
    if (caller === undefined || caller.kind !== "merchant") return next(req);
    const state = await limiter.take(caller.keyId);
    const headers = headersOf(state);
    try {
      if (!state.allowed) {
        throw new ApiError("RL_01", `Rate limit of ${state.limit} requests per minute exceeded for this API key; retry after ${state.retryAfter} s`);
      }
      const res = await next(req);
      for (const [name, value] of headers) res.header.set(name, value);
      return res;
    } catch (reason) {
      const error = toConnectError(reason);
      for (const [name, value] of headers) error.metadata.set(name, value);
      throw error;
    }
  };
}
