import type { FuzzRequest } from "./fuzz-request.js";
import type { FuzzTarget } from "./fuzz-target.js";
import type { Oracle, Violation } from "./oracle.js";
import { mebibytes, memoryCeilingBytes, type RunSummary } from "./run-summary.js";
import type { Answer } from "./senders.js";

/**
 * Runs one fast-check run: sends a batch of requests at once, judges every answer, and checks that
 * the server is still alive, healthy and within its memory bound afterwards.
 */
export class BatchCheck {
  /** Every card number sent in a card_number field, for the check of the server's log at the end. */
  readonly sentCardNumbers = new Set<string>();
  /** The target's restart count when memory was last sampled: a new process starts a new series. */
  private restartsSeen = 0;
  /** Variants (or labels) of requests that killed the server, not sent again when skipKnownCrashers is set. */
  private readonly crashers = new Set<string>();

  constructor(
    private readonly target: FuzzTarget,
    private readonly oracle: Oracle,
    private readonly summary: RunSummary,
    /**
     * In collect mode each crash costs a restart (seconds on the embedded database, with its
     * fixtures), so a kind of request that killed the server once is reported once and not sent again.
     */
    private readonly skipKnownCrashers: boolean,
  ) {}

  /** The violations of one batch; empty when the server kept every promise. */
  async check(fullBatch: readonly FuzzRequest[]): Promise<Violation[]> {
    await this.target.ensureRunning();
    const batch = this.skipKnownCrashers ? fullBatch.filter((r) => !this.crashers.has(crashKey(r))) : fullBatch;
    this.summary.skipped += fullBatch.length - batch.length;
    const stderrBefore = this.target.output.stderr.length;
    for (const request of batch) for (const number of request.cardNumbers) this.sentCardNumbers.add(number);
    const senders = this.target.requestSenders;
    const sent = performance.now();
    const answers = await Promise.all(batch.map((request) => senders.send(request)));
    this.summary.batchMillis.push(performance.now() - sent);
    if (await this.died(answers)) return [await this.crash(batch, answers, stderrBefore)];

    const violations: Violation[] = [];
    batch.forEach((request, i) => {
      const answer = answers[i]!;
      const { outcome, violations: found } = this.oracle.judge(request, answer);
      this.summary.record(request.protocol, outcome);
      for (const violation of found) violations.push(this.withReproducer(request, violation, answer.previousOnConnection));
    });
    const healthProblem = await this.target.health();
    if (await this.target.server.exitsWithin(healthProblem === undefined ? 0 : 500))
      return [...violations, await this.crash(batch, answers, stderrBefore)];
    if (healthProblem !== undefined) violations.push({ kind: "server: unhealthy after a batch", detail: healthProblem });
    const resident = this.target.server.residentBytes();
    if (resident !== undefined) {
      this.summary.recordResident(resident, this.target.restarts !== this.restartsSeen);
      this.restartsSeen = this.target.restarts;
      if (resident > memoryCeilingBytes) {
        violations.push({
          kind: "server: resident memory above 1 GiB",
          detail: `VmRSS ${mebibytes(resident)} after ${this.summary.residentSamples.length} batches`,
        });
      }
    }
    return violations;
  }

  /**
   * Whether the server died. A connection refused or reset waits a moment for the exit to be
   * reported; a request that timed out has already waited long enough for that.
   */
  private async died(answers: readonly Answer[]): Promise<boolean> {
    const refused = answers.some((a) => a.status === 0 && a.failure?.startsWith("no answer within") !== true);
    return this.target.server.exitsWithin(refused ? 500 : 0);
  }

  /**
   * The violation with the commands that reproduce it. They are built (and long bodies written to
   * files) only when the detail is read: collect mode keeps one example of each kind, not thousands.
   */
  private withReproducer(request: FuzzRequest, violation: Violation, previousOnConnection?: FuzzRequest): Violation {
    const target = this.target;
    const describe = (): string => {
      const previous =
        previousOnConnection === undefined
          ? ""
          : `\nthe kept-alive connection had just carried ${previousOnConnection.label}: ${target.reproducer(previousOnConnection)}`;
      return `${request.label}\nreproduce: ${target.reproducer(request)}\n${violation.detail}${previous}`;
    };
    let detail: string | undefined;
    return {
      kind: violation.kind,
      get detail() {
        detail ??= describe();
        return detail;
      },
    };
  }

  /**
   * The server died during the batch. The requests it left unanswered are sent again one at a time
   * to a fresh server until one kills it, so the report names a single request.
   */
  private async crash(batch: readonly FuzzRequest[], answers: readonly Answer[], stderrBefore: number): Promise<Violation> {
    const exit = this.target.server.exited!;
    const stderr = this.target.output.stderr.slice(stderrBefore);
    const error = stderr.find((line) => /^\s*(\w*Error|Error)\b.*:/.test(line))?.trim() ?? "no error on stderr";
    const kind = `server: exited (code ${exit.code}, signal ${exit.signal}) with ${error.replace(/\d+/g, "N").slice(0, 120)}`;
    const unanswered = batch.filter((_, i) => answers[i]!.failure !== undefined);
    const suspects = unanswered.length > 0 ? unanswered : batch;
    for (const suspect of suspects) {
      await this.target.ensureRunning();
      if (await this.died([await this.target.requestSenders.send(suspect)])) {
        this.crashers.add(crashKey(suspect));
        return this.withReproducer(suspect, {
          kind,
          detail: `this request alone kills the server; its stderr:\n${stderr.slice(0, 30).join("\n")}`,
        });
      }
    }
    return {
      kind,
      detail: `no single request of the batch kills a fresh server; the ${suspects.length} left unanswered were:\n${suspects
        .map((s) => this.target.reproducer(s))
        .join("\n")}\nstderr:\n${stderr.slice(0, 30).join("\n")}`,
    };
  }
}

/** What identifies a kind of request that kills the server: its variant, else its label. */
function crashKey(request: FuzzRequest): string {
  return request.variant ?? request.label;
}
