import { open, read } from "node:fs";
import { describe, expect, it } from "vitest";
import { answerWithin, NoAnswerError } from "./answer-within.js";

/** Keeps the event loop busy for `ms`, as a burst of requests does: no timer fires and no I/O is read meanwhile. */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

/** A file descriptor to read from: a read's answer comes back through the event loop's I/O phase, as a socket's does. */
function openFile(): Promise<number> {
  return new Promise((resolve, reject) => open(new URL(import.meta.url), "r", (error, fd) => (error ? reject(error) : resolve(fd))));
}

describe("answerWithin", () => {
  it("takes an answer that came in time but was read late, because the event loop was busy past the limit", async () => {
    const fd = await openFile();
    const answer = new Promise<number>((resolve, reject) =>
      read(fd, Buffer.alloc(16), 0, 16, 0, (error, bytes) => (error ? reject(error) : resolve(bytes))),
    );
    const waited = answerWithin(answer, 20, "the file");
    // The read is done within a millisecond; the loop takes its answer only after 100 ms, when the timer has run out too.
    busy(100);
    await expect(waited).resolves.toBe(16);
  });

  it("gives up with NoAnswerError when nothing comes", async () => {
    const never = new Promise<string>(() => undefined);
    await expect(answerWithin(never, 20, "Redis")).rejects.toThrow(new NoAnswerError("Redis", 20));
  });

  it("passes a failure on as it is", async () => {
    const refused = new Error("connection refused");
    await expect(answerWithin(Promise.reject(refused), 20, "Redis")).rejects.toBe(refused);
  });
});
