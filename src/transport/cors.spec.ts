import { describe, expect, it } from "vitest";
import { CorsPolicy, parseAllowedOrigins } from "./cors.js";

/*
 * The CORS policy as a browser meets it: which requests are preflights answered at once, and the
 * headers of a preflight's answer and of an actual answer, for allowed and other origins.
 */

const shop = "https://shop.example";
const policy = new CorsPolicy([shop, "http://127.0.0.1:5173"]);

/** Request headers as the port reads them. */
const headers = (values: Record<string, string>) => new Headers(values);

const preflightFrom = (origin: string) =>
  headers({ origin, "access-control-request-method": "POST", "access-control-request-headers": "api-key, content-type" });

describe("CORS_ALLOWED_ORIGINS", () => {
  it("lists exact origins, comma-separated; unset or empty allows none", () => {
    expect(parseAllowedOrigins(undefined)).toEqual([]);
    expect(parseAllowedOrigins("")).toEqual([]);
    expect(parseAllowedOrigins(" https://shop.example , http://127.0.0.1:5173,")).toEqual([shop, "http://127.0.0.1:5173"]);
  });

  it.each([
    "*",
    "null",
    "shop.example",
    "https://shop.example/",
    "https://shop.example/checkout",
    "https://Shop.example",
    "https://shop.example:443",
    "ftp://shop.example",
  ])("refuses %s at start-up, naming the variable", (value) => {
    expect(() => parseAllowedOrigins(value)).toThrow(/CORS_ALLOWED_ORIGINS/);
  });
});

describe("preflight", () => {
  it("is answered by the policy only for OPTIONS with Access-Control-Request-Method from an allowed origin", () => {
    expect(policy.answersPreflight("OPTIONS", preflightFrom(shop))).toBe(true);
    expect(policy.answersPreflight("OPTIONS", preflightFrom("https://evil.example"))).toBe(false);
    expect(policy.answersPreflight("OPTIONS", headers({ origin: shop }))).toBe(false);
    expect(policy.answersPreflight("POST", preflightFrom(shop))).toBe(false);
    expect(policy.answersPreflight("OPTIONS", headers({ "access-control-request-method": "POST" }))).toBe(false);
  });

  it("allows the origin, Connect's methods, the protocol, key and idempotency headers, with Vary and a max-age", () => {
    const answer = new Headers(policy.preflightHeaders(preflightFrom(shop), true));
    expect(answer.get("access-control-allow-origin")).toBe(shop);
    expect(answer.get("vary")).toBe("Origin");
    expect(answer.get("access-control-allow-methods")?.split(", ").sort()).toEqual(["GET", "POST"]);
    expect(answer.get("access-control-allow-headers")?.split(", ")).toEqual(
      expect.arrayContaining([
        "api-key",
        "content-type",
        "connect-protocol-version",
        "connect-timeout-ms",
        "x-grpc-web",
        "x-user-agent",
        "grpc-timeout",
        "x-idempotency-key",
        "idempotency-key",
      ]),
    );
    expect(Number(answer.get("access-control-max-age"))).toBeGreaterThan(0);
    expect(answer.has("access-control-allow-credentials")).toBe(false);
  });

  it("allows nothing for a method browsers may not call", () => {
    expect(policy.preflightHeaders(preflightFrom(shop), false)).toEqual([["vary", "Origin"]]);
  });
});

describe("actual responses", () => {
  it("allow an allowed origin and expose only the rate-limit, replay and gRPC status headers", () => {
    const answer = new Headers(policy.responseHeaders(headers({ origin: shop }), true));
    expect(answer.get("access-control-allow-origin")).toBe(shop);
    expect(answer.get("vary")).toBe("Origin");
    expect(answer.get("access-control-expose-headers")?.split(", ").sort()).toEqual(
      [
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        "retry-after",
        "idempotent-replayed",
        "grpc-status",
        "grpc-message",
        "grpc-status-details-bin",
      ].sort(),
    );
  });

  it("carry no CORS header for another origin or no origin, only Vary", () => {
    expect(policy.responseHeaders(headers({ origin: "https://evil.example" }), true)).toEqual([["vary", "Origin"]]);
    expect(policy.responseHeaders(headers({}), true)).toEqual([["vary", "Origin"]]);
  });

  it("carry nothing for a method browsers may not call", () => {
    expect(policy.responseHeaders(headers({ origin: shop }), false)).toEqual([]);
  });

  it("does not take an origin that differs only in case or port", () => {
    expect(policy.responseHeaders(headers({ origin: "https://SHOP.example" }), true)).toEqual([["vary", "Origin"]]);
    expect(policy.responseHeaders(headers({ origin: "http://127.0.0.1:5174" }), true)).toEqual([["vary", "Origin"]]);
  });
});
