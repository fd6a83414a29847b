import { afterEach, describe, expect, it, vi } from "vitest";
import { migrations } from "../migrations/index.js";

const names = migrations.map((Migration) => new Migration().name);
import { Readiness, type ProbeDatabase } from "./readiness.js";

/** A data source whose one query answers as `answer` says, counting the queries. */
function database(answer: () => Promise<unknown>): { dataSource: ProbeDatabase; queries: () => number } {
  let queries = 0;
  const dataSource = {
    query: () => {
      queries++;
      return answer();
    },
  } as ProbeDatabase;
  return { dataSource, queries: () => queries };
}

const applied = (count: number) => () => Promise.resolve([{ applied: count }]);

afterEach(() => {
  vi.useRealTimers();
});

describe("Readiness", () => {
  it("is ready when the database answers that every migration is applied", async () => {
    expect(await new Readiness(database(applied(migrations.length)).dataSource, names).isReady()).toBe(true);
  });

  it("is not ready when a migration is missing, or the database fails", async () => {
    expect(await new Readiness(database(applied(migrations.length - 1)).dataSource, names).isReady()).toBe(false);
    expect(await new Readiness(database(() => Promise.reject(new Error("connection refused"))).dataSource, names).isReady()).toBe(false);
  });

  it("is not ready when the database does not answer in time", async () => {
    vi.useFakeTimers();
    const ready = new Readiness(database(() => new Promise(() => {})).dataSource, names).isReady();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await ready).toBe(false);
  });

  it("asks the database at most once a second, however many ask it", async () => {
    let now = 0;
    const db = database(applied(migrations.length));
    const readiness = new Readiness(db.dataSource, names, () => now);
    await Promise.all([readiness.isReady(), readiness.isReady(), readiness.isReady()]);
    now = 999;
    await readiness.isReady();
    expect(db.queries()).toBe(1);
    now = 1_000;
    await readiness.isReady();
    expect(db.queries()).toBe(2);
  });

  it("is not ready once closing begins, and cuts short every pause at that moment", async () => {
    const readiness = new Readiness(database(applied(migrations.length)).dataSource, names);
    const pause = readiness.pause(3_600_000, new AbortController().signal);
    readiness.beginClosing();
    await pause;
    expect(readiness.isClosing).toBe(true);
    expect(await readiness.isReady()).toBe(false);
  });

  it("ends a pause when its call ends", async () => {
    const call = new AbortController();
    const pause = new Readiness(database(applied(migrations.length)).dataSource, names).pause(3_600_000, call.signal);
    call.abort();
    await pause;
  });
});
