import { constants } from "node:os";

/**
 * How long after the first stop signal another is taken for the same request.
 * A Ctrl-C reaches a server run by `npm start` twice: from the terminal, which signals its whole
 * foreground process group, and forwarded by npm a few milliseconds later. A person pressing Ctrl-C
 * again to insist does so well after this.
 */
export const echoWindowMs = 1_000;

/** What a process does on SIGINT or SIGTERM: stop gracefully once, or give up on the graceful stop. */
export interface StopActions {
  stop(signal: NodeJS.Signals): void;
  force(signal: NodeJS.Signals): void;
}

/**
 * Turns the SIGINTs and SIGTERMs a process receives into one graceful stop: the first starts it;
 * its echo (any within echoWindowMs) is ignored; a signal after that, from someone who will not
 * wait for the graceful stop, forces the process out.
 */
export class StopSignals {
  private firstAt: number | undefined;

  constructor(
    private readonly now: () => number,
    private readonly actions: StopActions,
  ) {}

  /** Handles one signal received. */
  receive(signal: NodeJS.Signals): void {
    if (this.firstAt === undefined) {
      this.firstAt = this.now();
      this.actions.stop(signal);
    } else if (this.now() - this.firstAt >= echoWindowMs) {
      this.actions.force(signal);
    }
  }

  /** Handles SIGINT and SIGTERM for this process from now on. */
  listen(): void {
    for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => this.receive(signal));
  }
}

/** The exit code of a process ended by `signal`, as a shell reports one it killed (130 for SIGINT). */
export function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + constants.signals[signal];
}
