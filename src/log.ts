import { pino, stdTimeFunctions } from "pino";
import { redactCardNumbers } from "./card-numbers.js";
import { redacted } from "./log-redaction.js";
import { logLevels, type LogLevel } from "./config.js";

/**
 * Structured logging with pino: one JSON object per line on stdout (time, level, pid, message and the
 * fields), so log shippers need no parser. Callers pass identifiers and outcomes only — never request
 * bodies, which may hold card data; what slips through anyway is redacted (log-redaction.ts).
 */
type Fields = Record<string, unknown>;

let pending: string[] = [];
/**
 * Set once stdout cannot be written (its reader went away: EPIPE). Serving payments matters more
 * than the log, so the service goes on and drops its lines rather than die on an unhandled error.
 */
let stdoutLost = false;
process.stdout.on("error", () => {
  stdoutLost = true;
});

/** Writes the lines of one event-loop turn with one system call instead of one per line. */
function flush(): void {
  if (stdoutLost) pending = [];
  if (pending.length === 0) return;
  const lines = pending.join("");
  pending = [];
  process.stdout.write(lines);
}

// stdout to a file or pipe is synchronous on Linux, so lines logged just before an exit still land.
process.on("exit", flush);

/** pino's destination: the batching, EPIPE-proof writer above rather than pino's own stream. */
const stdoutBatches = {
  write(line: string): void {
    if (pending.length === 0) setImmediate(flush);
    pending.push(line);
  },
};

/** The level named by LOG_LEVEL; an unknown one logs at info until configuration refuses it at start. */
function levelFromEnvironment(): LogLevel {
  const value = process.env.LOG_LEVEL?.trim() ?? "";
  return (logLevels as readonly string[]).includes(value) ? (value as LogLevel) : "info";
}

const logger = pino(
  {
    level: levelFromEnvironment(),
    messageKey: "message",
    base: { pid: process.pid },
    timestamp: stdTimeFunctions.isoTime,
    formatters: {
      level: (label) => ({ level: label }),
      log: (fields) => redacted(fields) as Fields,
    },
  },
  stdoutBatches,
);

/** The service's logger: `log.info(message, fields)`, fields being identifiers and outcomes. */
export const log = {
  debug: (message: string, fields: Fields = {}) => logger.debug(fields, redactCardNumbers(message)),
  info: (message: string, fields: Fields = {}) => logger.info(fields, redactCardNumbers(message)),
  warn: (message: string, fields: Fields = {}) => logger.warn(fields, redactCardNumbers(message)),
  error: (message: string, fields: Fields = {}) => logger.error(fields, redactCardNumbers(message)),
};

/**
 * Logs a background task's failures once per run of them, and its recovery: a loop that polls the
 * database every 100 ms would otherwise write ten lines a second for as long as an outage lasts,
 * drowning the lines that matter.
 */
export class FailureStreak {
  private failing = false;

  constructor(private readonly what: string) {}

  failed(error: unknown): void {
    if (this.failing) return;
    this.failing = true;
    log.error(`${this.what} failed; failures are not logged again until it succeeds`, { error: String(error) });
  }

  succeeded(): void {
    if (!this.failing) return;
    this.failing = false;
    log.info(`${this.what} works again`);
  }
}
