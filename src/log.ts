/**
 * Structured logging: one JSON object per line on stdout, so log shippers need no parser. Callers pass
 * identifiers and outcomes only — never request bodies, which may hold card data.
 */
type Fields = Record<string, unknown>;

const silent = process.env.LOG_LEVEL === "silent";
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

function write(level: "info" | "warn" | "error", message: string, fields: Fields): void {
  if (silent) return;
  if (pending.length === 0) setImmediate(flush);
  pending.push(`${JSON.stringify({ time: new Date().toISOString(), level, message, ...fields })}\n`);
}

/** The service's logger. */
export const log = {
  info: (message: string, fields: Fields = {}) => write("info", message, fields),
  warn: (message: string, fields: Fields = {}) => write("warn", message, fields),
  error: (message: string, fields: Fields = {}) => write("error", message, fields),
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
