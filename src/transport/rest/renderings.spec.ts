import { describe, expect, it } from "vitest";
import { asksFor } from "./renderings.js";

describe("asksFor", () => {
  const csv = "text/csv; charset=utf-8";

  it.each([
    ["text/csv", true],
    ["Text/CSV", true],
    ["text/csv;q=0.5", true],
    ["application/json, text/csv", true],
    ["text/csv;q=0.5, application/json", false],
    ["text/csv;q=0", false],
    ["application/json", false],
    ["*/*", false],
    ["text/*", false],
    ["text/csv;q=0.9, */*;q=0.1", true],
    ["text/csv;q=0.1, application/*;q=0.9", false],
  ])("%s → %s", (accept, expected) => {
    expect(asksFor(accept, csv)).toBe(expected);
  });

  it("answers JSON to a request without Accept", () => {
    expect(asksFor(undefined, csv)).toBe(false);
  });
});
