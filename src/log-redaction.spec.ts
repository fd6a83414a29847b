import { describe, expect, it } from "vitest";
import { redacted } from "./log-redaction.js";

describe("redacted", () => {
  it("censors a secret's value at the top, one level down and deeper", () => {
    expect(
      redacted({
        api_key: "sk_sandbox_x",
        request: { authorization: "Bearer x", card: { card_cvc: "737", cardNumber: "4242424242424242" } },
        attempts: [{ client_secret: "pay_1_secret_x", status: 200 }],
      }),
    ).toEqual({
      api_key: "[redacted]",
      request: { authorization: "[redacted]", card: { card_cvc: "[redacted]", cardNumber: "[redacted]" } },
      attempts: [{ client_secret: "[redacted]", status: 200 }],
    });
  });

  it("censors a secret's value whatever its type, headers whole", () => {
    expect(redacted({ headers: { "api-key": "sk_x", "x-request-id": "r" }, secret: 42, password: null })).toEqual({
      headers: "[redacted]",
      secret: "[redacted]",
      password: "[redacted]",
    });
  });

  it("replaces card numbers in every string, however deep, and keeps what is not one", () => {
    expect(
      redacted({
        cause: "Unknown field 4242 4242 4242 4242",
        nested: { list: ["5555-5555-5555-4444", "order_1795595407941"] },
        ms: 12.5,
        cut: true,
        code: undefined,
      }),
    ).toEqual({
      cause: "Unknown field [redacted]",
      nested: { list: ["[redacted]", "order_1795595407941"] },
      ms: 12.5,
      cut: true,
      code: undefined,
    });
  });

  it("copies other objects through their enumerable keys, as JSON writes them, and keeps those that serialize themselves", () => {
    const error = Object.assign(new Error("not shown by JSON"), { detail: "Key (card)=(4242424242424242)", secret: "s" });
    const at = new Date("2026-11-27T00:00:00Z");
    const fields = redacted({ error, at }) as { error: object; at: Date };
    expect(fields.error).toEqual({ detail: "Key (card)=([redacted])", secret: "[redacted]" });
    expect(fields.at).toBe(at);
  });

  it("stops at a nesting no log field has, so a cycle cannot overflow the stack", () => {
    const cyclic: Record<string, unknown> = { name: "loop" };
    cyclic.self = cyclic;
    const written = JSON.stringify(redacted({ cyclic }));
    expect(written).toContain('"[too deep]"');
    expect(written).toContain('"name":"loop"');
  });
});
