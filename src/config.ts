import { parseTrustedProxies } from "./transport/client-address.js";
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
  /** Failed authentications a client address may make per fixed minute before it is refused (RL_01). */
  readonly authFailureLimitPerMinute: number;
  /** How long a presented key found invalid is remembered, so repeating it costs no database lookup (0: not at all). */
  readonly invalidKeyCacheSeconds: number;
  /** Admin API calls a client address may make per fixed minute. */
  readonly adminRateLimitPerMinute: number;
  /** Peers whose X-Forwarded-For names the client (load balancers); empty trusts none, the address is the TCP peer. */
  readonly trustedProxies: readonly string[];
  /** Base of URLs handed to browsers (3DS pages); unset means http://localhost:<bound port>. */
  readonly publicBaseUrl: string | undefined;
  readonly databasePoolSize: number;
  /** How long a database call waits for a connection: a free one of the pool, or a new one being opened. */
  readonly databaseConnectTimeoutMs: number;
  /** How long one statement may run; PostgreSQL cancels it then, and the instance gives up on an answer shortly after. */
  readonly databaseStatementTimeoutMs: number;
  /** How long one statement may wait for a lock another transaction holds. */
  readonly databaseLockTimeoutMs: number;
  /** How long a transaction may sit idle before PostgreSQL ends its session (our transactions never wait on anything else). */
  readonly databaseIdleInTransactionTimeoutMs: number;
  /** Database calls that may wait for a connection at once; beyond, a call is refused at once (503) rather than queued. */
  readonly databaseMaxWaiting: number;
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
  /** Connections one instance holds open at most; at the cap a new one displaces the longest idle, or is closed. */
  readonly maxConnections: number;
  /** How long a connection may sit without a request (before its first byte too); above the load balancer's own idle timeout. */
  readonly idleTimeoutMs: number;
  /** How long a request's headers may take to arrive once it has begun (slowloris). */
  readonly headersTimeoutMs: number;
  /** How long a whole request, headers and body, may take to arrive (a body trickled byte by byte). */
  readonly requestTimeoutMs: number;
  /** Streams one HTTP/2 connection may have open at once. */
  readonly http2MaxConcurrentStreams: number;
}

/** Reads the configuration, failing with a message that names the variable when a value is unusable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const port = integer(env, "PORT", 8080, 0, 65535);
  const headersTimeoutMs = integer(env, "HEADERS_TIMEOUT_MS", 10_000, 100, 600_000);
  // Node's HTTP/1.1 server requires it: the headers are part of the request.
  const requestTimeoutMs = integer(env, "REQUEST_TIMEOUT_MS", 30_000, headersTimeoutMs, 3_600_000);
  return {
    port,
    databaseUrl: text(env, "DATABASE_URL"),
    dataDir: text(env, "DATA_DIR") ?? "./.data",
    redisUrl: text(env, "REDIS_URL"),
    adminApiKey: text(env, "ADMIN_API_KEY"),
    apiKeyHashSecret: text(env, "API_KEY_HASH_SECRET"),
    dataEncryptionKey: text(env, "DATA_ENCRYPTION_KEY"),
    rateLimitPerMinute: integer(env, "RATE_LIMIT_PER_MINUTE", 6000, 1, 1_000_000_000),
    authFailureLimitPerMinute: integer(env, "AUTH_FAILURE_LIMIT_PER_MINUTE", 100, 1, 1_000_000_000),
    invalidKeyCacheSeconds: integer(env, "INVALID_KEY_CACHE_SECONDS", 5, 0, 300),
    adminRateLimitPerMinute: integer(env, "ADMIN_RATE_LIMIT_PER_MINUTE", 600, 1, 1_000_000_000),
    trustedProxies: parseTrustedProxies(text(env, "TRUSTED_PROXIES")),
    publicBaseUrl: text(env, "PUBLIC_BASE_URL")?.replace(/\/+$/, ""),
    databasePoolSize: integer(env, "DATABASE_POOL_SIZE", 20, 1, 1000),
    databaseConnectTimeoutMs: integer(env, "DATABASE_CONNECT_TIMEOUT_MS", 5000, 100, 600_000),
    databaseStatementTimeoutMs: integer(env, "DATABASE_STATEMENT_TIMEOUT_MS", 15_000, 100, 3_600_000),
    databaseLockTimeoutMs: integer(env, "DATABASE_LOCK_TIMEOUT_MS", 5000, 100, 3_600_000),
    databaseIdleInTransactionTimeoutMs: integer(env, "DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS", 30_000, 1000, 3_600_000),
    databaseMaxWaiting: integer(env, "DATABASE_MAX_WAITING", 1000, 1, 1_000_000),
    workers: integer(env, "WORKERS", 1, 1, 64),
    jobPollMs: integer(env, "JOB_POLL_MS", 1000, 10, 3_600_000),
    sandboxTestClock: text(env, "SANDBOX_TEST_CLOCK") === "true",
    scheduledRefundDelaySeconds: integer(env, "SCHEDULED_REFUND_DELAY_SECONDS", 60, 0, 30 * 86_400),
    eventRetentionDays: integer(env, "EVENT_RETENTION_DAYS", 30, 30, 3650),
    webhookEndpointConcurrency: integer(env, "WEBHOOK_ENDPOINT_CONCURRENCY", 64, 1, 1000),
    shutdownDelayMs: integer(env, "SHUTDOWN_DELAY_MS", 5_000, 0, 600_000),
    shutdownGraceMs: integer(env, "SHUTDOWN_GRACE_MS", 20_000, 0, 600_000),
    corsAllowedOrigins: parseAllowedOrigins(text(env, "CORS_ALLOWED_ORIGINS")),
    maxConnections: integer(env, "MAX_CONNECTIONS", 10_000, 1, 1_000_000),
    idleTimeoutMs: integer(env, "IDLE_TIMEOUT_MS", 65_000, 100, 3_600_000),
    headersTimeoutMs,
    requestTimeoutMs,
    http2MaxConcurrentStreams: integer(env, "HTTP2_MAX_CONCURRENT_STREAMS", 100, 1, 10_000),
  };
}

function text(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === undefined || value === "" ? undefined : value;
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
