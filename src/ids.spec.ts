import { describe, expect, it } from "vitest";
import { idBody, newId } from "./ids.js";

/*
 * An id tells what it names by its prefix and stays unguessable, and ids made later sort after ids
 * made earlier byte by byte (as PostgreSQL's C collation and a B-tree compare them), so that a table's
 * index by id grows at its end.
 */

describe("ids", () => {
  it("are the prefix and 24 base62 characters", () => {
    expect(newId("pay")).toMatch(/^pay_[0-9A-Za-z]{24}$/);
  });

  it("sort later milliseconds after earlier ones, across every carry of the time's digits", () => {
    const moments = [0, 1, 61, 62, 63, 3_843, 3_844, 1_790_000_000_000, 1_790_000_000_001, 62 ** 7 - 1];
    const ids = moments.map((ms) => `txn_${idBody(ms)}`);
    const bytes = (id: string) => Buffer.from(id);
    for (let i = 1; i < ids.length; i++) expect(Buffer.compare(bytes(ids[i - 1]!), bytes(ids[i]!))).toBe(-1);
  });

  it("tell apart ids of one millisecond by 17 random characters", () => {
    const ids = Array.from({ length: 1_000 }, () => idBody(1_790_000_000_000));
    expect(new Set(ids).size).toBe(ids.length);
    expect(new Set(ids.map((id) => id.slice(0, 7))).size).toBe(1);
  });
});
