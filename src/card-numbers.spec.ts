import { describe, expect, it } from "vitest";
import { redactCardNumbers } from "./card-numbers.js";

describe("redactCardNumbers", () => {
  it.each([
    ["Payment not found: 4242424242424242", "Payment not found: [redacted]"],
    ["card 4242 4242 4242 4242 and 5555-5555-5555-4444", "card [redacted] and [redacted]"],
    ["Amex 378282246310005.", "Amex [redacted]."],
    ["Unknown field: x4242424242424242y", "Unknown field: x[redacted]y"],
  ])("%s → %s", (text, redacted) => {
    expect(redactCardNumbers(text)).toBe(redacted);
  });

  it.each([
    ["a number failing the Luhn check", "id 4242424242424241"],
    ["an epoch in milliseconds", "order_1795595407941 and order_1795595407941_taken"],
    ["too short to be a card", "amount 999999999999"],
    ["part of a longer run", "42424242424242424242"],
  ])("leaves %s alone", (_, text) => {
    expect(redactCardNumbers(text)).toBe(text);
  });
});
