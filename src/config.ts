import { isLogLevel, logLevels, type LogLevel } from "./log.js";
import { parseAllowedOrigins } from "./transport/cors.js";

/** Everything the service reads from its environment (decisions §1), parsed once at start-up. */
export interface Config {
  readonly port: number;
  /** PostgreSQL connection string; absent means the embedded database under dataDir. */
  readonly databaseUrl: string | undefined;
  /** Where the embedded database lives; ":memory:" keeps nothing. */
  readonly dataDir: string;
  readonly redisUrl: string | undefined;
  readonly adminApiKey: string | undefined;
  readonly apiKeyHashSecret: string | undefined;
  /** 64 hex digits: the AES-256 key of stored sensitive data (payout destinations). */
  readonly dataEncryptionKey: string | undefined;
  readonly rateLimitPerMinute: number;
  /** Base of URLs handed to browsers (3DS pages); unset means http://localhost:<bound port>. */
  readonly publicBaseUrl: string | undefined;
  readonly databasePoolSize: number;
  /** Processes serving the port (node:cluster); each is a full, stateless instance. */
  readonly workers: number;
  /** How often each instance looks for due jobs (scheduled captures, expiries). */
  readonly jobPollMs: number;
  /** Whether POST /sandbox/clock/advance may move the service's clock (never in production). */
  readonly sandboxTestClock: boolean;
  /** How long a scheduled refund waits for its settlement run. */
  readonly scheduledRefundDelaySeconds: number;
  /** How long events are kept (at least 30 days) before the job runner removes them. */
  readonly eventRetentionDays: number;
  /** Webhook attempts each instance sends at once to one profile's webhook_url. */
  readonly webhookEndpointConcurrency: number;
  /**
   * After SIGTERM, how long the instance keeps serving while reporting not ready, so load balancers
   * stop sending it calls before it stops accepting them.
   */
  readonly shutdownDelayMs: number;
  /** After it stops accepting connections, how long calls in flight may take to finish before they are cut. */
  readonly shutdownGraceMs: number;
  /** Browser origins allowed to call the API cross-origin (CORS); empty sends no CORS headers at all. */
  readonly corsAllowedOrigins: readonly string[];
  /**
   * Port of the operators' listener (/metrics, /livez, /readyz), kept apart from the API port so
   * metrics are never public; undefined opens none, 0 picks a free port (tests).
   */
  readonly opsPort: number | undefined;
  /** Quietest level that is still logged (the logger reads it at load; it is validated here so a typo stops the start). */
  readonly logLevel: LogLevel;
}

/** Reads the configuration, failing with a message that names the variable when a value is unusable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const port = integer(env, "PORT", 8080, 0, 65535);
  return {
    port,
    databaseUrl: text(env, "DATABASE_URL"),
    dataDir: text(env, "DATA_DIR") ?? "./.data",
    redisUrl: text(env, "REDIS_URL"),
    adminApiKey: text(env, "ADMIN_API_KEY"),
    apiKeyHashSecret: text(env, "API_KEY_HASH_SECRET"),
    dataEncryptionKey: text(env, "DATA_ENCRYPTION_KEY"),
    rateLimitPerMinute: integer(env, "RATE_LIMIT_PER_MINUTE", 6000, 1, 1_000_000_000),
    publicBaseUrl: text(env, "PUBLIC_BASE_URL")?.replace(/\/+$/, ""),
    databasePoolSize: integer(env, "DATABASE_POOL_SIZE", 20, 1, 1000),
    workers: integer(env, "WORKERS", 1, 1, 64),
    jobPollMs: integer(env, "JOB_POLL_MS", 1000, 10, 3_600_000),
    sandboxTestClock: text(env, "SANDBOX_TEST_CLOCK") === "true",
    scheduledRefundDelaySeconds: integer(env, "SCHEDULED_REFUND_DELAY_SECONDS", 60, 0, 30 * 86_400),
    eventRetentionDays: integer(env, "EVENT_RETENTION_DAYS", 30, 30, 3650),
    webhookEndpointConcurrency: integer(env, "WEBHOOK_ENDPOINT_CONCURRENCY", 64, 1, 1000),
    shutdownDelayMs: integer(env, "SHUTDOWN_DELAY_MS", 5_000, 0, 600_000),
    shutdownGraceMs: integer(env, "SHUTDOWN_GRACE_MS", 20_000, 0, 600_000),
    corsAllowedOrigins: parseAllowedOrigins(text(env, "CORS_ALLOWED_ORIGINS")),
    opsPort: text(env, "OPS_PORT") === undefined ? undefined : integer(env, "OPS_PORT", 0, 0, 65535),
    logLevel: logLevel(env),
  };
}

function text(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === undefined || value === "" ? undefined : value;
}

function logLevel(env: NodeJS.ProcessEnv): LogLevel {
  const value = text(env, "LOG_LEVEL") ?? "info";
  if (!isLogLevel(value)) throw new Error(`LOG_LEVEL must be one of ${logLevels.join(", ")}, got "${value}"`);
  return value;
}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const value = text(env, name);
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < min || parsed > max) {
    throw new Error(`${name} must be an integer from ${min} to ${max}, got "${value}"`);
  }
  return parsed;
}
