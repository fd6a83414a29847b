/** True for PostgreSQL's unique_violation (23505), which is how a duplicate caller-chosen id shows. */
export function isUniqueViolation(error: unknown): boolean {
  const cause = (error as { driverError?: { code?: string }; code?: string } | null) ?? {};
  return (cause.driverError?.code ?? cause.code) === "23505";
}

/**
 * SQLSTATEs that say the database cannot serve a call now rather than that the call is wrong: class 08
 * (connection exceptions, and no primary among DATABASE_URL's hosts) is matched by prefix; the rest
 * are the server shutting down or starting up, out of connections, a statement, lock wait or idle
 * transaction over its timeout, or a write that reached a server demoted to a standby (the service
 * opens no read-only transaction of its own, so 25006 means the primary moved).
 */
const unavailableStates = new Set(["57P01", "57P02", "57P03", "53300", "57014", "55P03", "25P03", "25006"]);

/** Socket errors of a connection to the database that went away or never came. */
const unavailableErrnos = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN"]);

/** What pg and pg-pool say, without a code, when a connection dies, cannot be had in time, or stops answering. */
const unavailableMessages = [
  "Connection terminated",
  "timeout exceeded when trying to connect",
  "Query read timeout",
  "Client has encountered a connection error and is not queryable",
];

/**
 * TypeORM's errors for a transaction whose connection it released when the connection failed: the
 * statements after the failure (the rest of the transaction, its COMMIT) meet them.
 */
const releasedRunnerErrors = new Set(["QueryRunnerAlreadyReleasedError", "QueryRunnerProviderAlreadyReleasedError"]);

/**
 * True when an error means the database is unreachable, restarting or not answering in time: the
 * call gets 503 SU_01 (retry), not 500 HE_00 (a fault of ours). TypeORM keeps pg's error as
 * `driverError`; pg-pool's timeouts keep the socket error as `cause`.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 4; depth++) {
    const { code, driverError } = cause as Error & { code?: unknown; driverError?: unknown };
    if (typeof code === "string" && (code.startsWith("08") || unavailableStates.has(code) || unavailableErrnos.has(code))) return true;
    if (releasedRunnerErrors.has(cause.name)) return true;
    if (unavailableMessages.some((message) => cause instanceof Error && cause.message.startsWith(message))) return true;
    cause = driverError ?? cause.cause;
  }
  return false;
}
