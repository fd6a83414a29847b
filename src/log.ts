/**
 * Structured logging: one JSON object per line on stdout, so log shippers need no parser. Callers pass
 * identifiers and outcomes only — never request bodies, which may hold card data.
 */
type Fields = Record<string, unknown>;

function write(level: "info" | "warn" | "error", message: string, fields: Fields): void {
  if (process.env.LOG_LEVEL === "silent") return;
  process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), level, message, ...fields })}\n`);
}

/** The service's logger. */
export const log = {
  info: (message: string, fields: Fields = {}) => write("info", message, fields),
  warn: (message: string, fields: Fields = {}) => write("warn", message, fields),
  error: (message: string, fields: Fields = {}) => write("error", message, fields),
};
