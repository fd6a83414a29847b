import pg from "pg";
import { describe, expect, it } from "vitest";
import { StatementBatches } from "./batches.js";

/** A statement that answers each item doubled, recording the batches it was given; each waits for `release`. */
function recordingStatement() {
  const batches: number[][] = [];
  const pending: (() => void)[] = [];
  const write = (batch: readonly number[]) =>
    new Promise<number[]>((resolve) => {
      batches.push([...batch]);
      pending.push(() => resolve(batch.map((n) => 2 * n)));
    });
  const releaseAll = () => {
    for (const release of pending.splice(0)) release();
  };
  return { batches, write, releaseAll };
}

/** Lets the batches of this event-loop turn go out (they are sent on setImmediate). */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("StatementBatches", () => {
  it("sends what arrives in one turn as one batch, and answers each item its own result", async () => {
    const { batches, write, releaseAll } = recordingStatement();
    const queue = new StatementBatches<number, number>(write);
    const answers = Promise.all([1, 2, 3].map((n) => queue.add(n, `row-${n}`)));
    await nextTurn();
    releaseAll();
    expect(await answers).toEqual([2, 4, 6]);
    expect(batches).toEqual([[1, 2, 3]]);
  });

  it("never puts two writes of one key in one batch, nor one whose key is in a batch on its way", async () => {
    const { batches, write, releaseAll } = recordingStatement();
    const queue = new StatementBatches<number, number>(write);
    const answers = Promise.all([queue.add(1, "row"), queue.add(2, "row"), queue.add(3, "other")]);
    await nextTurn();
    // The second write of "row" waits, though a second batch could go out now.
    expect(batches).toEqual([[1, 3]]);
    releaseAll();
    await nextTurn();
    await nextTurn();
    expect(batches).toEqual([[1, 3], [2]]);
    releaseAll();
    expect(await answers).toEqual([2, 4, 6]);
  });

  it("holds reads (no key) back for nothing: reads of one row share a batch", async () => {
    const { batches, write, releaseAll } = recordingStatement();
    const queue = new StatementBatches<number, number>(write);
    const answers = Promise.all([queue.add(7), queue.add(7), queue.add(7)]);
    await nextTurn();
    releaseAll();
    expect(await answers).toEqual([14, 14, 14]);
    expect(batches).toEqual([[7, 7, 7]]);
  });

  it("when the database rejects a batch, sends each item alone, so only the faulty one fails", async () => {
    const rejected = new pg.DatabaseError("invalid input", 0, "error");
    rejected.severity = "ERROR";
    const batches: number[][] = [];
    const queue = new StatementBatches<number, number>(async (batch) => {
      batches.push([...batch]);
      if (batch.includes(-1)) throw rejected;
      return batch.map((n) => 2 * n);
    });
    const answers = await Promise.allSettled([1, -1, 3].map((n) => queue.add(n, `row-${n}`)));
    expect(answers).toEqual([
      { status: "fulfilled", value: 2 },
      { status: "rejected", reason: rejected },
      { status: "fulfilled", value: 6 },
    ]);
    expect(batches[0]).toEqual([1, -1, 3]);
    expect(batches.slice(1).sort()).toEqual([[-1], [1], [3]]);
  });
});
