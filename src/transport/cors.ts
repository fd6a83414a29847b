import { cors } from "@connectrpc/connect";
import type { HeaderLookup } from "../auth/authenticate.js";

/**
 * Request headers a browser page may send: connect's protocol headers (Connect and gRPC-Web), the
 * API key and both spellings of the idempotency key.
 */
export const corsAllowedHeaders: readonly string[] = [
  ...new Set([...cors.allowedHeaders, "api-key", "x-idempotency-key", "idempotency-key"].map((name) => name.toLowerCase())),
];

/**
 * Response headers a page may read: the rate-limit state and a replay's mark, which a checkout
 * needs to pace and retry itself, and gRPC-Web's status headers (connect's encoding headers, which
 * browsers handle themselves, are left out: nothing is exposed that a page has no use for).
 */
export const corsExposedHeaders: readonly string[] = [
  "x-ratelimit-limit",
  "x-ratelimit-remaining",
  "x-ratelimit-reset",
  "retry-after",
  "idempotent-replayed",
  ...cors.exposedHeaders.map((name) => name.toLowerCase()).filter((name) => name.startsWith("grpc-")),
];

/** How long a browser may reuse a preflight's answer: Chromium's own ceiling (two hours). */
export const corsMaxAgeSeconds = 7200;

/** One response header as a name and its value. */
export type HeaderPair = [string, string];

/**
 * Which browser origins may call the API (CORS_ALLOWED_ORIGINS), and the headers that tell a browser
 * so. Only methods a publishable key may call are opened to browsers: a page holds no secret, so a
 * cross-origin page calling anything else is a mistake the browser should stop.
 */
export class CorsPolicy {
  private readonly origins: ReadonlySet<string>;

  constructor(origins: Iterable<string>) {
    this.origins = new Set(origins);
  }

  /**
   * Whether a request is a preflight this policy answers itself, before anything else (no API key,
   * no rate limit): OPTIONS with Access-Control-Request-Method from an allowed origin. Any other
   * OPTIONS is an ordinary request, refused as the path refuses the method.
   */
  answersPreflight(httpMethod: string | undefined, header: HeaderLookup): boolean {
    return httpMethod === "OPTIONS" && header.get("access-control-request-method") !== null && this.allows(header.get("origin"));
  }

  /**
   * Headers of the 204 answering a preflight `answersPreflight` accepted. For a method browsers may
   * not call (or a path with none) only Vary is sent, so the browser refuses the call itself.
   */
  preflightHeaders(header: HeaderLookup, browserCallable: boolean): HeaderPair[] {
    const origin = header.get("origin");
    if (!browserCallable || origin === null || !this.allows(origin)) return [["vary", "Origin"]];
    return [
      ["vary", "Origin"],
      ["access-control-allow-origin", origin],
      ["access-control-allow-methods", cors.allowedMethods.join(", ")],
      ["access-control-allow-headers", corsAllowedHeaders.join(", ")],
      ["access-control-max-age", String(corsMaxAgeSeconds)],
    ];
  }

  /**
   * Headers added to the answer of a call of a browser-callable method: the origin allowed and the
   * readable headers, when the origin is allowed. Vary is always sent, since the answer depends on
   * the Origin and a cache must not hand one origin's answer to another.
   */
  responseHeaders(header: HeaderLookup, browserCallable: boolean): HeaderPair[] {
    if (!browserCallable) return [];
    const origin = header.get("origin");
    if (origin === null || !this.allows(origin)) return [["vary", "Origin"]];
    return [
      ["vary", "Origin"],
      ["access-control-allow-origin", origin],
      ["access-control-expose-headers", corsExposedHeaders.join(", ")],
    ];
  }

  private allows(origin: string | null): boolean {
    return origin !== null && this.origins.has(origin);
  }
}

/**
 * Reads CORS_ALLOWED_ORIGINS: comma-separated exact origins (`https://shop.example`, with a port
 * when not the scheme's default). Anything else (a path, a wildcard, `null`) is refused at start-up,
 * since an origin that can never match would fail silently in every browser.
 */
export function parseAllowedOrigins(value: string | undefined): string[] {
  if (value === undefined) return [];
  const origins = value
    .split(",")
    .map((part) => part.trim())
    .filter((part) => part !== "");
  for (const origin of origins) {
    const parsed = URL.canParse(origin) ? new URL(origin) : undefined;
    if (parsed === undefined || (parsed.protocol !== "http:" && parsed.protocol !== "https:") || parsed.origin !== origin) {
      throw new Error(
        `CORS_ALLOWED_ORIGINS must list exact origins such as https://shop.example (scheme, lower-case host, port if not the default; no path), got "${origin}"`,
      );
    }
  }
  return origins;
}
