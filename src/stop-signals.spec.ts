import { describe, expect, it } from "vitest";
import { echoWindowMs, signalExitCode, StopSignals } from "./stop-signals.js";

/*
 * One Ctrl-C stops the server gracefully even though it arrives twice (from the terminal and
 * forwarded by npm); a later one forces the stop.
 */

/** A StopSignals on a clock the test moves, recording what it did. */
function signals() {
  let now = 0;
  const done: string[] = [];
  const handler = new StopSignals(() => now, {
    stop: (signal) => done.push(`stop ${signal}`),
    force: (signal) => done.push(`force ${signal}`),
  });
  return { handler, done, advance: (ms: number) => (now += ms) };
}

describe("StopSignals", () => {
  it("stops on the first signal and takes its echo within the window for the same request", () => {
    const { handler, done, advance } = signals();
    handler.receive("SIGINT");
    advance(5);
    handler.receive("SIGINT");
    advance(echoWindowMs - 10);
    handler.receive("SIGTERM");
    expect(done).toEqual(["stop SIGINT"]);
  });

  it("forces the stop on a signal after the window", () => {
    const { handler, done, advance } = signals();
    handler.receive("SIGTERM");
    advance(echoWindowMs);
    handler.receive("SIGINT");
    expect(done).toEqual(["stop SIGTERM", "force SIGINT"]);
  });

  it("exits as a shell reports a process a signal ended", () => {
    expect(signalExitCode("SIGINT")).toBe(130);
    expect(signalExitCode("SIGTERM")).toBe(143);
  });
});
