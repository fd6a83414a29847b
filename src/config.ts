import { type DatabaseAddress, parseDatabaseUrl } from "./db/address.js";
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
  /** The secret API_KEY_HASH_SECRET replaced: keys hashed with it still authenticate, and are re-hashed when they do. */
  readonly apiKeyHashPreviousSecret: string | undefined;
  /** The secret about to replace API_KEY_HASH_SECRET: keys other instances already re-hashed with it authenticate here too. */
  readonly apiKeyHashNextSecret: string | undefined;
  /** 64 hex digits: the AES-256 key of stored sensitive data (payout destinations). */
  readonly dataEncryptionKey: string | undefined;
  /** Keys DATA_ENCRYPTION_KEY replaced, each 64 hex digits: they still decrypt, never encrypt. */
  readonly dataEncryptionPreviousKeys: readonly string[];
  /** The key about to replace DATA_ENCRYPTION_KEY: it decrypts what instances already switched to it wrote. */
  readonly dataEncryptionNextKey: string | undefined;
  readonly rateLimitPerMinute: number;
  /** Failed authentications a client address may make per fixed minute before it is refused (RL_01). */
  readonly authFailureLimitPerMinute: number;
  /** How long a presented key found invalid is remembered, so repeating it costs no database lookup (0: not at all). */
  readonly invalidKeyCacheSeconds: number;
  /** Admin API calls a client address may make per fixed minute. */
  readonly adminRateLimitPerMinute: number;
  /** Card tokenizations and confirmations a client address may make with a publishable key per fixed minute (decisions §10). */
  readonly cardTestingLimitPerMinute: number;
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
  /**
   * Attempts a job gets before it is dead (kept for an operator to list and retry). The default 20,
   * with the retry delays of 10 s doubling up to an hour, gives up after about 11.5 hours: long
   * enough to outlast a processor or database outage of an afternoon, short enough that a job that
   * can never succeed reaches an operator the same day rather than retrying every hour forever.
   */
  readonly jobMaxAttempts: number;
  /** Whether POST /sandbox/clock/advance may move the service's clock (never in production). */
  readonly sandboxTestClock: boolean;
  /** How long a scheduled refund waits for its settlement run. */
  readonly scheduledRefundDelaySeconds: number;
  /** How long events are kept (at least 30 days) before the job runner removes them. */
  readonly eventRetentionDays: number;
  /** Webhook attempts each instance sends at once to one profile's webhook_url. */
  readonly webhookEndpointConcurrency: number;
  /** How long a webhook attempt waits for its answer before it fails as "no answer"; leases last four of them and 30 s. */
  readonly webhookAttemptTimeoutMs: number;
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
  /** How much the service logs; "silent" logs nothing (src/log.ts reads it at load; it is checked here so a typo stops the start). */
  readonly logLevel: LogLevel;
  /**
   * Port of the operators' listener (/metrics, /livez, /readyz), kept apart from the API port so
   * metrics are never public; undefined opens none, 0 picks a free port (tests).
   */
  readonly opsPort: number | undefined;
  /**
   * Whether start-up applies pending migrations (the default). False: a deploy job runs
   * `npm run migrate` once, and an instance refuses to start while migrations are pending.
   */
  readonly migrateOnStart: boolean;
  /**
   * Where OpenTelemetry traces go (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT);
   * undefined, or OTEL_SDK_DISABLED=true, traces nothing and never loads the SDK. The SDK reads
   * the other OTEL_* variables itself; the ones a typo would silently break are checked here.
   */
  readonly tracesEndpoint: string | undefined;
}

/** The OTLP transports the SDK speaks (OTEL_EXPORTER_OTLP_PROTOCOL). */
export const otlpProtocols = ["http/protobuf", "http/json", "grpc"] as const;

/** The values LOG_LEVEL takes, from quietest to most verbose. */
export const logLevels = ["silent", "error", "warn", "info", "debug"] as const;

/** One of logLevels. */
export type LogLevel = (typeof logLevels)[number];

/** Shortest ADMIN_API_KEY accepted: the admin key moves money, so a guessable one is refused at start. */
export const minAdminApiKeyLength = 16;

/** Shortest API_KEY_HASH_SECRET accepted: 32 characters, as many bytes as the HMAC-SHA256 key it becomes. */
export const minHashSecretLength = 32;

/**
 * Every unusable setting found at start-up, each message naming its variable and what it expects,
 * so an operator fixes them all in one go. Secrets' values are never repeated in a message.
 */
export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration: ${problems.join("; ")}`);
    this.name = "ConfigError";
  }
}

/** What the process reading the configuration will do with it. */
export interface ConfigUse {
  /**
   * Whether it uses the shared secrets (API_KEY_HASH_SECRET, DATA_ENCRYPTION_KEY), which DATABASE_URL
   * then requires; `npm run migrate` touches no key nor stored secret, so its job needs neither.
   */
  readonly sharedSecrets: boolean;
}

/**
 * Reads and checks the configuration; throws a ConfigError listing every unusable value, each named
 * with what it expects, before anything is opened.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, use: ConfigUse = { sharedSecrets: true }): Config {
  const problems: string[] = [];
  const check = <T>(read: () => T, fallback: T): T => {
    try {
      return read();
    } catch (error) {
      problems.push(error instanceof Error ? error.message : String(error));
      return fallback;
    }
  };
  const int = (name: string, fallback: number, min: number, max: number) => check(() => integer(env, name, fallback, min, max), fallback);
  const headersTimeoutMs = int("HEADERS_TIMEOUT_MS", 10_000, 100, 600_000);
  const config: Config = {
    port: int("PORT", 8080, 0, 65535),
    databaseUrl: check(() => databaseUrl(env), undefined),
    dataDir: text(env, "DATA_DIR") ?? "./.data",
    redisUrl: check(() => url(env, "REDIS_URL", ["redis:", "rediss:"], "redis://host:6379"), undefined),
    adminApiKey: check(() => secret(env, "ADMIN_API_KEY", minAdminApiKeyLength), undefined),
    apiKeyHashSecret: check(
      () => sharedSecret(env, use, "API_KEY_HASH_SECRET", secret(env, "API_KEY_HASH_SECRET", minHashSecretLength)),
      undefined,
    ),
    apiKeyHashPreviousSecret: check(() => rotatingHashSecret(env, "API_KEY_HASH_PREVIOUS_SECRET"), undefined),
    apiKeyHashNextSecret: check(() => rotatingHashSecret(env, "API_KEY_HASH_NEXT_SECRET"), undefined),
    dataEncryptionKey: check(() => sharedSecret(env, use, "DATA_ENCRYPTION_KEY", hexKey(env, "DATA_ENCRYPTION_KEY")), undefined),
    dataEncryptionPreviousKeys: check(() => previousDataKeys(env), []),
    dataEncryptionNextKey: check(() => nextDataKey(env), undefined),
    rateLimitPerMinute: int("RATE_LIMIT_PER_MINUTE", 6000, 1, 1_000_000_000),
    authFailureLimitPerMinute: int("AUTH_FAILURE_LIMIT_PER_MINUTE", 100, 1, 1_000_000_000),
    invalidKeyCacheSeconds: int("INVALID_KEY_CACHE_SECONDS", 5, 0, 300),
    adminRateLimitPerMinute: int("ADMIN_RATE_LIMIT_PER_MINUTE", 600, 1, 1_000_000_000),
    cardTestingLimitPerMinute: int("CARD_TESTING_LIMIT_PER_MINUTE", 30, 1, 1_000_000_000),
    trustedProxies: check(() => parseTrustedProxies(text(env, "TRUSTED_PROXIES")), []),
    publicBaseUrl: check(() => publicUrl(env, "PUBLIC_BASE_URL"), undefined),
    databasePoolSize: int("DATABASE_POOL_SIZE", 20, 1, 1000),
    databaseConnectTimeoutMs: int("DATABASE_CONNECT_TIMEOUT_MS", 5000, 100, 600_000),
    databaseStatementTimeoutMs: int("DATABASE_STATEMENT_TIMEOUT_MS", 15_000, 100, 3_600_000),
    databaseLockTimeoutMs: int("DATABASE_LOCK_TIMEOUT_MS", 5000, 100, 3_600_000),
    databaseIdleInTransactionTimeoutMs: int("DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS", 30_000, 1000, 3_600_000),
    databaseMaxWaiting: int("DATABASE_MAX_WAITING", 1000, 1, 1_000_000),
    workers: int("WORKERS", 1, 1, 64),
    jobPollMs: int("JOB_POLL_MS", 1000, 10, 3_600_000),
    jobMaxAttempts: int("JOB_MAX_ATTEMPTS", 20, 1, 1000),
    sandboxTestClock: text(env, "SANDBOX_TEST_CLOCK") === "true",
    scheduledRefundDelaySeconds: int("SCHEDULED_REFUND_DELAY_SECONDS", 60, 0, 30 * 86_400),
    eventRetentionDays: int("EVENT_RETENTION_DAYS", 30, 30, 3650),
    webhookEndpointConcurrency: int("WEBHOOK_ENDPOINT_CONCURRENCY", 64, 1, 1000),
    webhookAttemptTimeoutMs: int("WEBHOOK_ATTEMPT_TIMEOUT_MS", 10_000, 100, 60_000),
    shutdownDelayMs: int("SHUTDOWN_DELAY_MS", 5_000, 0, 600_000),
    shutdownGraceMs: int("SHUTDOWN_GRACE_MS", 20_000, 0, 600_000),
    corsAllowedOrigins: check(() => parseAllowedOrigins(text(env, "CORS_ALLOWED_ORIGINS")), []),
    maxConnections: int("MAX_CONNECTIONS", 10_000, 1, 1_000_000),
    idleTimeoutMs: int("IDLE_TIMEOUT_MS", 65_000, 100, 3_600_000),
    headersTimeoutMs,
    // Node's HTTP/1.1 server requires it: the headers are part of the request.
    requestTimeoutMs: int("REQUEST_TIMEOUT_MS", 30_000, headersTimeoutMs, 3_600_000),
    http2MaxConcurrentStreams: int("HTTP2_MAX_CONCURRENT_STREAMS", 100, 1, 10_000),
    logLevel: check(() => oneOf(env, "LOG_LEVEL", logLevels, "info"), "info"),
    opsPort: text(env, "OPS_PORT") === undefined ? undefined : int("OPS_PORT", 0, 0, 65535),
    migrateOnStart: check(() => boolean(env, "MIGRATE_ON_START", true), true),
    tracesEndpoint: check(() => tracesEndpoint(env), undefined),
  };
  if (config.apiKeyHashPreviousSecret !== undefined && config.apiKeyHashNextSecret !== undefined) {
    problems.push(
      "API_KEY_HASH_PREVIOUS_SECRET and API_KEY_HASH_NEXT_SECRET are both set: a rotation sets the next secret first, then makes it current with the old one as previous",
    );
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

/**
 * The OTLP endpoint traces are sent to, when tracing is on; the protocols named must be ones the SDK
 * speaks, since it would otherwise fall back to another without a word and the collector see nothing.
 */
function tracesEndpoint(env: NodeJS.ProcessEnv): string | undefined {
  const example = "http://collector:4318";
  const endpoint =
    url(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ["http:", "https:"], example) ??
    url(env, "OTEL_EXPORTER_OTLP_ENDPOINT", ["http:", "https:"], example);
  for (const name of ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"])
    oneOf(env, name, otlpProtocols, "http/protobuf");
  // The SDK's own switch, which it reads case-insensitively.
  const disabled = text(env, "OTEL_SDK_DISABLED")?.toLowerCase() === "true";
  return disabled ? undefined : endpoint;
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

/** A URL with one of `protocols`. Its value is not repeated: connection strings hold passwords. */
function url(env: NodeJS.ProcessEnv, name: string, protocols: readonly string[], example: string): string | undefined {
  const value = text(env, name);
  if (value === undefined) return undefined;
  const expected = `${name} must be a ${protocols.map((p) => `${p}//`).join(" or ")} URL, e.g. ${example}`;
  if (!URL.canParse(value)) throw new Error(`${expected} (the value set is not a URL; it is not shown as it may hold a password)`);
  const parsed = new URL(value);
  if (!protocols.includes(parsed.protocol)) throw new Error(`${expected} (the value set is a ${parsed.protocol}// URL)`);
  // pg takes a Unix socket directory as ?host=/path, with the URL's own host left empty.
  if (parsed.hostname === "" && !parsed.searchParams.has("host")) throw new Error(`${expected} (the value set names no host)`);
  return value;
}

const databaseUrlExample = "postgres://user:password@host:5432/database";

/**
 * DATABASE_URL: one host, or libpq's list of hosts (decisions §12), each of which must be a URL pg
 * can use. The messages never repeat the value, which may hold a password.
 */
function databaseUrl(env: NodeJS.ProcessEnv): string | undefined {
  const value = text(env, "DATABASE_URL");
  if (value === undefined) return undefined;
  const protocols = ["postgres:", "postgresql:"];
  let address: DatabaseAddress;
  try {
    address = parseDatabaseUrl(value);
  } catch (error) {
    // Not even a postgres:// URL: the general check says what it is instead.
    if (!/^postgres(?:ql)?:\/\//.test(value)) return url(env, "DATABASE_URL", protocols, databaseUrlExample);
    throw new Error(
      `DATABASE_URL must be a postgres:// or postgresql:// URL, e.g. ${databaseUrlExample}, or one with several hosts, ` +
        `e.g. postgres://user@host1:5432,host2:5432/database?target_session_attrs=read-write (the value set ${(error as Error).message})`,
    );
  }
  for (const host of address.hosts) url({ DATABASE_URL: host.url }, "DATABASE_URL", protocols, databaseUrlExample);
  return value;
}

/** An http(s) URL handed to browsers, without its trailing slashes. Not secret, so the message shows it. */
function publicUrl(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = text(env, name);
  if (value === undefined) return undefined;
  const parsed = URL.canParse(value) ? new URL(value) : undefined;
  if (parsed === undefined || (parsed.protocol !== "http:" && parsed.protocol !== "https:") || parsed.hostname === "") {
    throw new Error(`${name} must be an http:// or https:// URL such as https://pay.example.com, got "${value}"`);
  }
  if (parsed.search !== "" || parsed.hash !== "") throw new Error(`${name} must have no query or fragment, got "${value}"`);
  return value.replace(/\/+$/, "");
}

/** A secret of at least `minLength` characters; only its length is ever reported. */
function secret(env: NodeJS.ProcessEnv, name: string, minLength: number): string | undefined {
  const value = text(env, name);
  if (value !== undefined && value.length < minLength) {
    throw new Error(
      `${name} must be at least ${minLength} characters (the value set has ${value.length}), e.g. the output of \`openssl rand -hex 32\``,
    );
  }
  return value;
}

/**
 * A secret every instance sharing a PostgreSQL database must hold alike, so it must be configured
 * with DATABASE_URL (the embedded database generates its own and keeps it in DATA_DIR).
 */
function sharedSecret(env: NodeJS.ProcessEnv, use: ConfigUse, name: string, value: string | undefined): string | undefined {
  if (value === undefined && use.sharedSecrets && text(env, "DATABASE_URL") !== undefined) {
    throw new Error(
      `${name} must be set when DATABASE_URL is set (every instance sharing the database needs the same value), e.g. the output of \`openssl rand -hex 32\``,
    );
  }
  return value;
}

/** 32 bytes written as 64 hex digits: an AES-256 key. Only what is wrong with it is reported. */
function hexKey(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = text(env, name);
  if (value !== undefined && !/^[0-9a-fA-F]{64}$/.test(value)) {
    throw new Error(
      `${name} must be exactly 64 hex digits (32 bytes), e.g. the output of \`openssl rand -hex 32\` (the value set has ${hexFound(value)})`,
    );
  }
  return value;
}

/** What is wrong with a would-be hex key, in terms that do not reveal it. */
function hexFound(value: string): string {
  return /^[0-9a-fA-F]*$/.test(value) ? `${value.length} hex digits` : `${value.length} characters, not all hex digits`;
}

/**
 * API_KEY_HASH_PREVIOUS_SECRET or API_KEY_HASH_NEXT_SECRET: only beside a configured
 * API_KEY_HASH_SECRET it differs from (a rotation names both); its value is never reported.
 */
function rotatingHashSecret(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = secret(env, name, minHashSecretLength);
  if (value === undefined) return undefined;
  const current = text(env, "API_KEY_HASH_SECRET");
  if (current === undefined) throw new Error(`${name} is set but API_KEY_HASH_SECRET is not: a rotation sets both`);
  if (value === current) throw new Error(`${name} must differ from API_KEY_HASH_SECRET`);
  return value;
}

/**
 * DATA_ENCRYPTION_PREVIOUS_KEYS: comma-separated keys of the DATA_ENCRYPTION_KEY form, only beside a
 * configured DATA_ENCRYPTION_KEY, none equal to it nor to each other. Entries are named by position, never shown.
 */
function previousDataKeys(env: NodeJS.ProcessEnv): string[] {
  const name = "DATA_ENCRYPTION_PREVIOUS_KEYS";
  const value = text(env, name);
  if (value === undefined) return [];
  if (text(env, "DATA_ENCRYPTION_KEY") === undefined) {
    throw new Error(`${name} is set but DATA_ENCRYPTION_KEY is not: a rotation sets both`);
  }
  const keys = value.split(",").map((key) => key.trim());
  keys.forEach((key, index) => {
    if (!/^[0-9a-fA-F]{64}$/.test(key)) {
      throw new Error(`${name} must be a comma-separated list of keys of 64 hex digits (entry ${index + 1} has ${hexFound(key)})`);
    }
  });
  const lower = keys.map((key) => key.toLowerCase());
  if (lower.includes(text(env, "DATA_ENCRYPTION_KEY")!.toLowerCase())) {
    throw new Error(`${name} must not list DATA_ENCRYPTION_KEY itself (it holds the keys being replaced)`);
  }
  if (new Set(lower).size !== lower.length) throw new Error(`${name} lists the same key twice`);
  return keys;
}

/** DATA_ENCRYPTION_NEXT_KEY: one key of the DATA_ENCRYPTION_KEY form, beside a different DATA_ENCRYPTION_KEY. */
function nextDataKey(env: NodeJS.ProcessEnv): string | undefined {
  const name = "DATA_ENCRYPTION_NEXT_KEY";
  const value = hexKey(env, name);
  if (value === undefined) return undefined;
  const current = text(env, "DATA_ENCRYPTION_KEY");
  if (current === undefined) throw new Error(`${name} is set but DATA_ENCRYPTION_KEY is not: a rotation sets both`);
  if (value.toLowerCase() === current.toLowerCase()) throw new Error(`${name} must differ from DATA_ENCRYPTION_KEY`);
  return value;
}

function oneOf<T extends string>(env: NodeJS.ProcessEnv, name: string, values: readonly T[], fallback: T): T {
  const value = text(env, name);
  if (value === undefined) return fallback;
  if (!(values as readonly string[]).includes(value)) throw new Error(`${name} must be one of ${values.join(", ")}, got "${value}"`);
  return value as T;
}

function boolean(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const value = text(env, name);
  if (value === undefined) return fallback;
  if (value !== "true" && value !== "false") throw new Error(`${name} must be true or false, got "${value}"`);
  return value === "true";
}
