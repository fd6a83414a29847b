import type { Outcome, Violation } from "./oracle.js";
import type { Protocol } from "./fuzz-request.js";

/** A violation kind with its first example and how often it occurred, for collect mode. */
interface CollectedViolation {
  readonly example: Violation;
  count: number;
}

/** The memory check's bounds: an absolute ceiling, and how much a late sample may exceed an early one. */
export const memoryCeilingBytes = 1024 * 1024 * 1024;

/**
 * Growth allowed between the early and the late sample: 50% plus 256 MiB. The embedded database
 * lives in the server's memory and grows with every object the fuzzer creates (tens of thousands
 * of payments, customers, events and idempotency keys in a full run), and V8's heap settles at a
 * size set by its GC heuristics, not by the data; a leak per request (a few kilobytes kept per
 * call, i.e. hundreds of MiB per 100,000 requests) still exceeds it.
 */
export function memoryGrowthBound(earlyBytes: number): number {
  return earlyBytes * 1.5 + 256 * 1024 * 1024;
}

/** What the run sent and what came back: the summary printed at the end and the collected violations. */
export class RunSummary {
  readonly started = Date.now();
  private readonly protocols = new Map<Protocol, number>();
  private readonly statuses = new Map<string, number>();
  private readonly codes = new Map<string, number>();
  private readonly violations = new Map<string, CollectedViolation>();
  /** Requests not sent because their kind had killed the server before (collect mode). */
  skipped = 0;
  /** How long each batch took from its first request to its last answer. */
  readonly batchMillis: number[] = [];
  /** Resident memory after each batch since the server last started, in bytes: a restart begins a new series. */
  residentSamples: number[] = [];
  /** The highest resident memory of any server process of the run. */
  maxResident = 0;

  /** Records the server's resident memory after a batch; `restarted` starts a new series. */
  recordResident(bytes: number, restarted: boolean): void {
    if (restarted) this.residentSamples = [];
    this.residentSamples.push(bytes);
    this.maxResident = Math.max(this.maxResident, bytes);
  }

  /** Counts one request and its outcome. */
  record(protocol: Protocol, outcome: Outcome): void {
    increment(this.protocols, protocol);
    increment(this.statuses, `${protocol} ${outcome.status}`);
    if (outcome.code !== undefined) increment(this.codes, outcome.code);
  }

  /** Keeps a violation (the first of its kind as the example) for collect mode. */
  collect(violation: Violation): void {
    const known = this.violations.get(violation.kind);
    if (known === undefined) this.violations.set(violation.kind, { example: violation, count: 1 });
    else known.count++;
  }

  /** How many distinct kinds of violation were collected. */
  get violationKinds(): number {
    return this.violations.size;
  }

  /** The summary: requests per protocol, statuses, codes, duration, memory, and the server's own account of its errors. */
  format(restarts: { count: number; millis: number }, serverLog: readonly string[], cardNumbersTracked: number): string {
    const seconds = (Date.now() - this.started) / 1000;
    const total = [...this.protocols.values()].reduce((a, b) => a + b, 0);
    const batches = [...this.batchMillis].sort((a, b) => a - b);
    const percentile = (p: number) => `${Math.round(batches[Math.min(batches.length - 1, Math.floor(batches.length * p))] ?? 0)} ms`;
    const lines = [
      `fuzz summary: ${total} requests in ${seconds.toFixed(1)} s (${Math.round(total / seconds)}/s), ${this.skipped} skipped as known crashers`,
      `  ${restarts.count} server restarts (${(restarts.millis / 1000).toFixed(1)} s); ${batches.length} batches: median ${percentile(0.5)}, p90 ${percentile(0.9)}, max ${percentile(1)}; ${batches.filter((ms) => ms >= 2_000).length} batches waited for a 2 s deadline`,
      `  ${cardNumbersTracked} distinct card numbers sent in card_number fields, checked against every answer and the server's log`,
      `  max RSS ${mebibytes(this.maxResident)}; since the last start: first ${mebibytes(this.residentSamples[0] ?? 0)}, last ${mebibytes(this.residentSamples.at(-1) ?? 0)} over ${this.residentSamples.length} batches`,
      "  requests per protocol:",
      ...table(this.protocols),
      "  statuses:",
      ...table(this.statuses),
      "  error codes:",
      ...table(this.codes),
      ...serverLogDigest(serverLog),
    ];
    if (this.violations.size > 0) {
      lines.push(`  ${this.violations.size} distinct violations:`);
      for (const [kind, { example, count }] of [...this.violations].sort(([a], [b]) => a.localeCompare(b))) {
        lines.push(`  ✗ ${kind} (×${count})`, `      ${example.detail.replace(/\n/g, "\n      ")}`);
      }
    }
    return lines.join("\n");
  }
}

function increment<K>(counts: Map<K, number>, key: K): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

function table<K>(counts: Map<K, number>): string[] {
  return [...counts].sort(([, a], [, b]) => b - a).map(([key, count]) => `    ${String(count).padStart(7)}  ${String(key)}`);
}

/** Bytes as MiB with one decimal. */
export function mebibytes(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** One JSON line of the server's log, as far as the digest reads it. */
interface LogEntry {
  level?: unknown;
  message?: unknown;
  procedure?: unknown;
  ms?: unknown;
  cause?: unknown;
  error?: unknown;
}

/**
 * What the server logged about its failures (error lines by message and first line of the cause)
 * and its slowest calls: the answers only say "internal", the log says why, and a timeout is
 * explained by what the server was busy with.
 */
function serverLogDigest(lines: readonly string[]): string[] {
  const errors = new Map<string, number>();
  const slowest: { ms: number; line: string }[] = [];
  for (const line of lines) {
    if (!line.startsWith("{")) continue;
    let entry: LogEntry;
    try {
      entry = JSON.parse(line) as LogEntry;
    } catch {
      continue;
    }
    if (entry.level === "error") {
      const cause = String(entry.cause ?? entry.error ?? "")
        .split("\n")[0]!
        .slice(0, 160);
      increment(errors, `${String(entry.message)}: ${cause}`);
    }
    if (typeof entry.ms === "number" && entry.ms >= 500) slowest.push({ ms: entry.ms, line: line.slice(0, 300) });
  }
  slowest.sort((a, b) => b.ms - a.ms);
  return [
    "  server log errors:",
    ...table(errors),
    `  server calls that took 500 ms or more: ${slowest.length}`,
    ...slowest.slice(0, 5).map(({ line }) => `    ${line}`),
  ];
}
