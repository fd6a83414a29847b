import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "./config.js";

/*
 * The start-up check of the environment: each rule accepts what it should, and refuses the rest with
 * a message that names the variable and what it expects, never repeating a secret's value.
 */

/** The problems loadConfig reports for `env`; fails the test when it accepts it. */
function problems(env: NodeJS.ProcessEnv): readonly string[] {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

/** The one problem reported for `env`. */
function problem(env: NodeJS.ProcessEnv): string {
  const found = problems(env);
  expect(found).toHaveLength(1);
  return found[0]!;
}

const hashSecret = "0123456789abcdef0123456789abcdef";
const dataKey = "ab".repeat(32);
/** The secrets that must come with DATABASE_URL, for tests of other rules. */
const sharedSecrets = { API_KEY_HASH_SECRET: hashSecret, DATA_ENCRYPTION_KEY: dataKey };

describe("loadConfig", () => {
  it("takes an empty environment: the embedded database, generated secrets, info logs, migrations on start", () => {
    const config = loadConfig({});
    expect(config.databaseUrl).toBeUndefined();
    expect(config.redisUrl).toBeUndefined();
    expect(config.adminApiKey).toBeUndefined();
    expect(config.logLevel).toBe("info");
    expect(config.migrateOnStart).toBe(true);
  });

  it("takes a complete production environment", () => {
    const config = loadConfig({
      DATABASE_URL: "postgresql://payments:s3cret@db.internal:5432/payments?sslmode=require",
      REDIS_URL: "rediss://:s3cret@cache.internal:6380/0",
      PUBLIC_BASE_URL: "https://pay.example.com/",
      API_KEY_HASH_SECRET: hashSecret,
      DATA_ENCRYPTION_KEY: dataKey.toUpperCase(),
      ADMIN_API_KEY: "0123456789abcdef",
      LOG_LEVEL: "warn",
      MIGRATE_ON_START: "false",
    });
    expect(config.databaseUrl).toBe("postgresql://payments:s3cret@db.internal:5432/payments?sslmode=require");
    expect(config.redisUrl).toBe("rediss://:s3cret@cache.internal:6380/0");
    expect(config.publicBaseUrl).toBe("https://pay.example.com");
    expect(config.logLevel).toBe("warn");
    expect(config.migrateOnStart).toBe(false);
  });

  it("treats an empty or blank value as unset", () => {
    const config = loadConfig({ DATABASE_URL: "", REDIS_URL: " ", ADMIN_API_KEY: "", LOG_LEVEL: "", MIGRATE_ON_START: "" });
    expect(config.databaseUrl).toBeUndefined();
    expect(config.redisUrl).toBeUndefined();
    expect(config.adminApiKey).toBeUndefined();
    expect(config.logLevel).toBe("info");
    expect(config.migrateOnStart).toBe(true);
  });

  describe("DATABASE_URL", () => {
    it.each(["postgres://u@h/db", "postgresql://u:p@h:5433/db", "postgresql:///db?host=/var/run/postgresql"])("takes %s", (url) => {
      expect(loadConfig({ DATABASE_URL: url, ...sharedSecrets }).databaseUrl).toBe(url);
    });

    it("needs both shared secrets, and names every one missing in the one report", () => {
      expect(problems({ DATABASE_URL: "postgres://u@h/db" })).toEqual([
        "API_KEY_HASH_SECRET must be set when DATABASE_URL is set (every instance sharing the database needs the same value), e.g. the output of `openssl rand -hex 32`",
        "DATA_ENCRYPTION_KEY must be set when DATABASE_URL is set (every instance sharing the database needs the same value), e.g. the output of `openssl rand -hex 32`",
      ]);
      expect(problem({ DATABASE_URL: "postgres://u@h/db", API_KEY_HASH_SECRET: hashSecret })).toMatch(/^DATA_ENCRYPTION_KEY must be set/);
    });

    it("needs neither secret for a process that uses none (npm run migrate)", () => {
      expect(loadConfig({ DATABASE_URL: "postgres://u@h/db" }, { sharedSecrets: false }).apiKeyHashSecret).toBeUndefined();
    });

    it("names the missing secrets beside a malformed DATABASE_URL and a malformed secret", () => {
      const found = problems({ DATABASE_URL: "mysql://db/payments", DATA_ENCRYPTION_KEY: "abc" });
      expect(found.map((p) => p.split(" ")[0])).toEqual(["DATABASE_URL", "API_KEY_HASH_SECRET", "DATA_ENCRYPTION_KEY"]);
      expect(found[2]).toContain("must be exactly 64 hex digits");
    });

    it("refuses a value that is not a URL without showing it (it may hold a password)", () => {
      const message = problem({ DATABASE_URL: "host=db password=hunter2", ...sharedSecrets });
      expect(message).toMatch(
        /^DATABASE_URL must be a postgres:\/\/ or postgresql:\/\/ URL, e\.g\. postgres:\/\/user:password@host:5432\/database/,
      );
      expect(message).toContain("not a URL");
      expect(message).not.toContain("hunter2");
    });

    it("takes libpq's list of hosts, and refuses one it cannot follow, naming why without showing the value", () => {
      const url = "postgres://app:hunter2@db-a:5432,db-b:5432/payments?target_session_attrs=read-write";
      expect(loadConfig({ DATABASE_URL: url, ...sharedSecrets }).databaseUrl).toBe(url);
      const message = problem({ DATABASE_URL: "postgres://app:hunter2@db-a,db-b/payments?target_session_attrs=standby", ...sharedSecrets });
      expect(message).toMatch(/^DATABASE_URL must be a postgres:\/\/ or postgresql:\/\/ URL, .* or one with several hosts/);
      expect(message).toContain(
        "(the value set has target_session_attrs=standby; the service writes, so it takes any, read-write, primary)",
      );
      expect(message).not.toContain("hunter2");
      expect(problem({ DATABASE_URL: "postgres://app@db-a,db b/payments", ...sharedSecrets })).toContain("(the value set is not a URL");
    });

    it("refuses a URL without a host", () => {
      expect(problem({ DATABASE_URL: "postgres:///payments", ...sharedSecrets })).toContain("(the value set names no host)");
    });

    it("refuses another scheme, naming the scheme only", () => {
      const message = problem({ DATABASE_URL: "mysql://root:hunter2@db/payments", ...sharedSecrets });
      expect(message).toContain("DATABASE_URL must be a postgres:// or postgresql:// URL");
      expect(message).toContain("mysql://");
      expect(message).not.toContain("hunter2");
    });
  });

  describe("REDIS_URL", () => {
    it.each(["redis://127.0.0.1:6379", "rediss://:pw@cache:6380/2"])("takes %s", (url) => {
      expect(loadConfig({ REDIS_URL: url }).redisUrl).toBe(url);
    });

    it.each(["127.0.0.1:6379", "http://cache:6379", "redis://:hunter2@"])("refuses %s, without its value", (url) => {
      const message = problem({ REDIS_URL: url });
      expect(message).toMatch(/^REDIS_URL must be a redis:\/\/ or rediss:\/\/ URL, e\.g\. redis:\/\/host:6379/);
      expect(message).not.toContain("hunter2");
    });
  });

  describe("PUBLIC_BASE_URL", () => {
    it("drops trailing slashes and keeps a path", () => {
      expect(loadConfig({ PUBLIC_BASE_URL: "http://localhost:8080/pay//" }).publicBaseUrl).toBe("http://localhost:8080/pay");
    });

    it.each(["pay.example.com", "ftp://pay.example.com", "https://"])("refuses %s, showing it", (url) => {
      expect(problem({ PUBLIC_BASE_URL: url })).toBe(
        `PUBLIC_BASE_URL must be an http:// or https:// URL such as https://pay.example.com, got "${url}"`,
      );
    });

    it("refuses a query or fragment, which URLs appended to it would break", () => {
      expect(problem({ PUBLIC_BASE_URL: "https://pay.example.com/?a=1" })).toBe(
        'PUBLIC_BASE_URL must have no query or fragment, got "https://pay.example.com/?a=1"',
      );
    });
  });

  describe("API_KEY_HASH_SECRET", () => {
    it("takes 32 characters", () => {
      expect(loadConfig({ API_KEY_HASH_SECRET: hashSecret }).apiKeyHashSecret).toBe(hashSecret);
    });

    it("refuses 31, saying how many it has and never what", () => {
      const message = problem({ API_KEY_HASH_SECRET: hashSecret.slice(1) });
      expect(message).toBe(
        "API_KEY_HASH_SECRET must be at least 32 characters (the value set has 31), e.g. the output of `openssl rand -hex 32`",
      );
    });
  });

  describe("ADMIN_API_KEY", () => {
    it("takes 16 characters", () => {
      expect(loadConfig({ ADMIN_API_KEY: "0123456789abcdef" }).adminApiKey).toBe("0123456789abcdef");
    });

    it("refuses 15 without showing them", () => {
      const message = problem({ ADMIN_API_KEY: "short-admin-key" });
      expect(message).toBe(
        "ADMIN_API_KEY must be at least 16 characters (the value set has 15), e.g. the output of `openssl rand -hex 32`",
      );
    });
  });

  describe("DATA_ENCRYPTION_KEY", () => {
    it("takes 64 hex digits in either case", () => {
      expect(loadConfig({ DATA_ENCRYPTION_KEY: "aB".repeat(32) }).dataEncryptionKey).toBe("aB".repeat(32));
    });

    it.each([
      ["ab".repeat(31), "62 hex digits"],
      ["ab".repeat(33), "66 hex digits"],
      [`${"ab".repeat(31)}zz`, "64 characters, not all hex digits"],
    ])("refuses a key of %s, saying what is wrong and not what it is", (key, found) => {
      const message = problem({ DATA_ENCRYPTION_KEY: key });
      expect(message).toBe(
        `DATA_ENCRYPTION_KEY must be exactly 64 hex digits (32 bytes), e.g. the output of \`openssl rand -hex 32\` (the value set has ${found})`,
      );
      expect(message).not.toContain(key);
    });
  });

  describe("API_KEY_HASH_PREVIOUS_SECRET and API_KEY_HASH_NEXT_SECRET (rotation)", () => {
    const previous = "fedcba9876543210fedcba9876543210";

    it("takes either, a secret of 32 characters beside a different API_KEY_HASH_SECRET", () => {
      expect(loadConfig({ API_KEY_HASH_SECRET: hashSecret, API_KEY_HASH_PREVIOUS_SECRET: previous }).apiKeyHashPreviousSecret).toBe(
        previous,
      );
      expect(loadConfig({ API_KEY_HASH_SECRET: hashSecret, API_KEY_HASH_NEXT_SECRET: previous }).apiKeyHashNextSecret).toBe(previous);
      expect(loadConfig({}).apiKeyHashPreviousSecret).toBeUndefined();
      expect(loadConfig({}).apiKeyHashNextSecret).toBeUndefined();
    });

    it.each([
      [{ API_KEY_HASH_PREVIOUS_SECRET: previous }, "API_KEY_HASH_PREVIOUS_SECRET is set but API_KEY_HASH_SECRET is not"],
      [
        { API_KEY_HASH_SECRET: hashSecret, API_KEY_HASH_NEXT_SECRET: hashSecret },
        "API_KEY_HASH_NEXT_SECRET must differ from API_KEY_HASH_SECRET",
      ],
      [
        { API_KEY_HASH_SECRET: hashSecret, API_KEY_HASH_PREVIOUS_SECRET: previous.slice(1) },
        "at least 32 characters (the value set has 31)",
      ],
      [
        { API_KEY_HASH_SECRET: hashSecret, API_KEY_HASH_PREVIOUS_SECRET: previous, API_KEY_HASH_NEXT_SECRET: `${previous}x` },
        "API_KEY_HASH_PREVIOUS_SECRET and API_KEY_HASH_NEXT_SECRET are both set",
      ],
    ])("refuses %j, never showing a secret", (env, expected) => {
      const message = problem(env);
      expect(message).toContain(expected);
      expect(message).not.toContain(previous.slice(1));
      expect(message).not.toContain(hashSecret);
    });
  });

  describe("DATA_ENCRYPTION_PREVIOUS_KEYS and DATA_ENCRYPTION_NEXT_KEY (rotation)", () => {
    const old1 = "cd".repeat(32);
    const old2 = "ef".repeat(32);

    it("takes comma-separated keys beside DATA_ENCRYPTION_KEY, spaces around commas ignored", () => {
      const config = loadConfig({ DATA_ENCRYPTION_KEY: dataKey, DATA_ENCRYPTION_PREVIOUS_KEYS: `${old1}, ${old2}` });
      expect(config.dataEncryptionPreviousKeys).toEqual([old1, old2]);
      expect(loadConfig({}).dataEncryptionPreviousKeys).toEqual([]);
      expect(loadConfig({ DATA_ENCRYPTION_KEY: dataKey, DATA_ENCRYPTION_NEXT_KEY: old1 }).dataEncryptionNextKey).toBe(old1);
    });

    it.each([
      [{ DATA_ENCRYPTION_PREVIOUS_KEYS: old1 }, "DATA_ENCRYPTION_PREVIOUS_KEYS is set but DATA_ENCRYPTION_KEY is not"],
      [
        { DATA_ENCRYPTION_KEY: dataKey, DATA_ENCRYPTION_PREVIOUS_KEYS: `${old1},${old2.slice(2)}` },
        "DATA_ENCRYPTION_PREVIOUS_KEYS must be a comma-separated list of keys of 64 hex digits (entry 2 has 62 hex digits)",
      ],
      [{ DATA_ENCRYPTION_KEY: dataKey, DATA_ENCRYPTION_PREVIOUS_KEYS: dataKey.toUpperCase() }, "must not list DATA_ENCRYPTION_KEY itself"],
      [{ DATA_ENCRYPTION_KEY: dataKey, DATA_ENCRYPTION_PREVIOUS_KEYS: `${old1},${old1}` }, "lists the same key twice"],
      [{ DATA_ENCRYPTION_NEXT_KEY: old1 }, "DATA_ENCRYPTION_NEXT_KEY is set but DATA_ENCRYPTION_KEY is not"],
      [
        { DATA_ENCRYPTION_KEY: dataKey, DATA_ENCRYPTION_NEXT_KEY: dataKey },
        "DATA_ENCRYPTION_NEXT_KEY must differ from DATA_ENCRYPTION_KEY",
      ],
      [{ DATA_ENCRYPTION_KEY: dataKey, DATA_ENCRYPTION_NEXT_KEY: old1.slice(1) }, "DATA_ENCRYPTION_NEXT_KEY must be exactly 64 hex digits"],
    ])("refuses %j, never showing a key", (env, expected) => {
      const message = problem(env);
      expect(message).toContain(expected);
      for (const key of [dataKey, old1.slice(1), old2.slice(2)]) expect(message.toLowerCase()).not.toContain(key);
    });
  });

  describe("LOG_LEVEL", () => {
    it.each(["silent", "error", "warn", "info", "debug"])("takes %s", (level) => {
      expect(loadConfig({ LOG_LEVEL: level }).logLevel).toBe(level);
    });

    it.each(["verbose", "INFO", "trace"])("refuses %s, listing the levels", (level) => {
      expect(problem({ LOG_LEVEL: level })).toBe(`LOG_LEVEL must be one of silent, error, warn, info, debug, got "${level}"`);
    });
  });

  describe("MIGRATE_ON_START", () => {
    it.each([
      ["true", true],
      ["false", false],
    ])("takes %s", (value, expected) => {
      expect(loadConfig({ MIGRATE_ON_START: value }).migrateOnStart).toBe(expected);
    });

    it.each(["no", "0", "FALSE"])("refuses %s rather than guess", (value) => {
      expect(problem({ MIGRATE_ON_START: value })).toBe(`MIGRATE_ON_START must be true or false, got "${value}"`);
    });
  });

  describe("JOB_MAX_ATTEMPTS", () => {
    it("defaults to 20 (about 11½ hours of retries) and takes 1 to 1000", () => {
      expect(loadConfig({}).jobMaxAttempts).toBe(20);
      expect(loadConfig({ JOB_MAX_ATTEMPTS: "1" }).jobMaxAttempts).toBe(1);
      expect(loadConfig({ JOB_MAX_ATTEMPTS: "1000" }).jobMaxAttempts).toBe(1000);
    });

    it.each(["0", "1001", "2.5", "forever"])("refuses %s, naming the range", (value) => {
      expect(problem({ JOB_MAX_ATTEMPTS: value })).toBe(`JOB_MAX_ATTEMPTS must be an integer from 1 to 1000, got "${value}"`);
    });
  });

  describe("OTEL_EXPORTER_OTLP_ENDPOINT", () => {
    it("leaves tracing off when unset, or when OTEL_SDK_DISABLED says so", () => {
      expect(loadConfig({}).tracesEndpoint).toBeUndefined();
      expect(
        loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", OTEL_SDK_DISABLED: "TRUE" }).tracesEndpoint,
      ).toBeUndefined();
    });

    it("turns tracing on, the traces' own endpoint first", () => {
      expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }).tracesEndpoint).toBe("http://collector:4318");
      const both = {
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://traces.example.com/v1/traces",
      };
      expect(loadConfig(both).tracesEndpoint).toBe("https://traces.example.com/v1/traces");
    });

    it("refuses what is not an http(s) URL", () => {
      expect(problem({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" })).toBe(
        "OTEL_EXPORTER_OTLP_ENDPOINT must be a http:// or https:// URL, e.g. http://collector:4318 (the value set is a collector:// URL)",
      );
    });

    it.each(["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"])("refuses a %s the SDK does not speak", (name) => {
      expect(loadConfig({ [name]: "grpc" }).tracesEndpoint).toBeUndefined();
      expect(problem({ [name]: "http" })).toBe(`${name} must be one of http/protobuf, http/json, grpc, got "http"`);
    });
  });

  it("reports every unusable value at once, in one message an operator reads in the log", () => {
    const env = { DATABASE_URL: "localhost", ADMIN_API_KEY: "admin", LOG_LEVEL: "loud", PORT: "http", ...sharedSecrets };
    expect(problems(env)).toEqual([
      'PORT must be an integer from 0 to 65535, got "http"',
      "DATABASE_URL must be a postgres:// or postgresql:// URL, e.g. postgres://user:password@host:5432/database (the value set is not a URL; it is not shown as it may hold a password)",
      "ADMIN_API_KEY must be at least 16 characters (the value set has 5), e.g. the output of `openssl rand -hex 32`",
      'LOG_LEVEL must be one of silent, error, warn, info, debug, got "loud"',
    ]);
    expect(() => loadConfig(env)).toThrow(
      /^invalid configuration: PORT must be .*; DATABASE_URL must be .*; ADMIN_API_KEY .*; LOG_LEVEL .*$/,
    );
  });
});
