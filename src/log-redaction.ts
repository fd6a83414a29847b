import { redactCardNumbers } from "./card-numbers.js";

/*
 * What a log line's fields lose before they are written. One walk over the fields does it all:
 * pino's own `redact` option parses each of its paths again for every line, which cost a request
 * about 30 µs on a 2-core VM, more than the rest of its log line (docs/performance.md, "The request
 * log's redaction").
 */

/** Names under which a secret would travel (keys, authorization headers, card fields): their values are never written. */
const secretKeys = new Set([
  "api_key",
  "apiKey",
  "admin_api_key",
  "authorization",
  "secret",
  "client_secret",
  "password",
  "card_number",
  "cardNumber",
  "card_cvc",
  "cardCvc",
  "cvc",
  "headers",
]);

/** What a censored value is written as. */
const censored = "[redacted]";

/** Nesting past which a value is not walked but dropped: a log field is an identifier or an outcome, and a cycle must not overflow the stack. */
const maxDepth = 8;

/**
 * `value` as it may be logged: the value of every key named in `secretKeys` censored, at any depth,
 * and every card number in a string replaced (an error message may quote what a client sent).
 * Objects that serialize themselves (`toJSON`: dates, buffers) are kept as they are; any other
 * object is copied through its own enumerable keys, which is all JSON writes of it.
 */
export function redacted(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return redactCardNumbers(value);
  if (typeof value !== "object" || value === null) return value;
  if (depth === maxDepth) return "[too deep]";
  if (Array.isArray(value)) return value.map((item) => redacted(item, depth + 1));
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") return value;
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    copy[key] = secretKeys.has(key) ? censored : redacted((value as Record<string, unknown>)[key], depth + 1);
  }
  return copy;
}
