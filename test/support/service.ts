import { closeApp, openApp, serve, type App, type ShutdownTiming } from "../../src/app.js";
import { loadConfig, type Config } from "../../src/config.js";
import type { Clock } from "../../src/clock.js";
import type { JobRunner } from "../../src/jobs/runner.js";
import { embeddedTemplate, fileDatabaseUrl } from "./database.js";
import { startLoadBalancer, type LoadBalancer } from "./load-balancer.js";
import { freePort } from "./ports.js";

/** The operator key every test service accepts (ADMIN_API_KEY: 16 characters at least). */
export const adminApiKey = "test-admin-api-key";

/** The API key hash secret of every test service (API_KEY_HASH_SECRET: 32 characters at least). */
export const testHashSecret = "test-api-key-hash-secret-32chars";

/** The data encryption key of every test service: instances sharing a database must share it. */
export const testDataEncryptionKey = "5e".repeat(32);

/** A per-address limit no test run reaches: the suites send everything from 127.0.0.1. */
export const unreachedLimit = "1000000000";

/** Overrides that push the background job poll out of reach, so jobs run only when a test calls runDue(). */
export const noPolling = { JOB_POLL_MS: "3600000" };

/**
 * Configuration for a test service: an ephemeral port, real PostgreSQL when DATABASE_URL is set and
 * a private in-memory embedded database otherwise. startService points it at the file's own database.
 */
export function testConfig(overrides: NodeJS.ProcessEnv = {}): Config {
  return loadConfig({
    DATA_DIR: ":memory:",
    API_KEY_HASH_SECRET: testHashSecret,
    DATA_ENCRYPTION_KEY: testDataEncryptionKey,
    DATABASE_POOL_SIZE: "10",
    // Every test calls from 127.0.0.1, many with wrong keys on purpose, many publishable confirms: only
    // the tests of these limits (test/faults/auth-abuse.fault.ts, src/transport/admission.spec.ts)
    // set them low, from addresses of their own.
    AUTH_FAILURE_LIMIT_PER_MINUTE: unreachedLimit,
    ADMIN_RATE_LIMIT_PER_MINUTE: unreachedLimit,
    CARD_TESTING_LIMIT_PER_MINUTE: unreachedLimit,
    ...process.env,
    PORT: "0",
    ADMIN_API_KEY: adminApiKey,
    ...overrides,
  });
}

/** What tests do with a service's job runners. */
export type TestJobs = Pick<JobRunner, "runDue" | "register" | "start" | "stop">;

/**
 * The job runners of every instance behind the load balancer, driven as one. A call that makes a job
 * due at once wakes the runner of the instance that served it, which may then hold the job while the
 * first instance's runDue passes it by as locked: so runDue runs every instance's and waits for all.
 */
function everyInstance(runners: readonly TestJobs[]): TestJobs {
  return {
    async runDue() {
      return (await Promise.all(runners.map((runner) => runner.runDue()))).reduce((sum, ran) => sum + ran, 0);
    },
    register(...args) {
      for (const runner of runners) runner.register(...args);
    },
    start() {
      for (const runner of runners) runner.start();
    },
    async stop() {
      await Promise.all(runners.map((runner) => runner.stop()));
    },
  };
}

/** A service started for a test file, on a real port. */
export interface TestService {
  readonly url: string;
  /** The operators' port (/metrics, probes), when the overrides set OPS_PORT. */
  readonly opsUrl: string | undefined;
  readonly app: App;
  /** The service's job runners: tests call runDue() rather than wait for a poll. */
  readonly jobs: TestJobs;
  /** Shuts it down as SIGTERM would (`timing` as in RunningService.close) and closes its database. */
  close(timing?: ShutdownTiming): Promise<void>;
}

/**
 * How startService builds "the service" of a test: `single`, one instance in this process; or
 * `haproxy` (TEST_TOPOLOGY=haproxy, on PostgreSQL with REDIS_URL), three instances on the file's
 * database behind HAProxy, so the whole suite checks that instances behave as one.
 */
export const testTopology = topologyOf(process.env.TEST_TOPOLOGY);

function topologyOf(value: string | undefined): "single" | "haproxy" {
  if (value === undefined || value === "" || value === "single") return "single";
  if (value !== "haproxy") throw new Error(`TEST_TOPOLOGY must be "single" or "haproxy", not ${JSON.stringify(value)}`);
  if (process.env.DATABASE_URL === undefined) throw new Error("TEST_TOPOLOGY=haproxy needs DATABASE_URL: instances share one database");
  if (process.env.REDIS_URL === undefined) throw new Error("TEST_TOPOLOGY=haproxy needs REDIS_URL: instances share rate limits");
  return value;
}

/** How many instances the haproxy topology runs behind the load balancer. */
export const instancesBehindLoadBalancer = 3;

/**
 * Opens the app of a test (testConfig with these overrides) on the test file's database: its clone
 * on PostgreSQL, or an in-memory copy of the embedded template.
 */
export async function openTestApp(overrides: NodeJS.ProcessEnv = {}, clock?: Clock): Promise<App> {
  const databaseUrl = await fileDatabaseUrl();
  return openApp(testConfig({ ...(databaseUrl === undefined ? {} : { DATABASE_URL: databaseUrl }), ...overrides }), {
    clock,
    embeddedTemplate: await embeddedTemplate(),
  });
}

/**
 * Starts one instance of the real service (database, migrations, port) as `npm start` does, whatever
 * the topology: for the tests that must talk to one instance and say why where they call it.
 */
export async function startInstance(overrides: NodeJS.ProcessEnv = {}, clock?: Clock): Promise<TestService> {
  const app = await openTestApp(overrides, clock);
  const running = await serve(app);
  return {
    url: running.url,
    opsUrl: running.opsUrl,
    app,
    jobs: app.jobs,
    async close(timing) {
      await running.close(timing);
      await closeApp(app);
    },
  };
}

/**
 * Starts services at once; when one fails to start, closes those that did before rethrowing, so no
 * instance is left running on the file's database to take its jobs and webhook deliveries from the
 * next tests (seen in CI: a leaked trio sent a later test's deliveries past its per-endpoint limit).
 */
export async function startTogether(starts: readonly (() => Promise<TestService>)[]): Promise<TestService[]> {
  const outcomes = await Promise.allSettled(starts.map((start) => start()));
  const started = outcomes.flatMap((outcome) => (outcome.status === "fulfilled" ? [outcome.value] : []));
  const failed = outcomes.find((outcome): outcome is PromiseRejectedResult => outcome.status === "rejected");
  if (failed === undefined) return started;
  await Promise.all(started.map((service) => service.close()));
  throw failed.reason;
}

/**
 * Starts the service of a test in the topology TEST_TOPOLOGY names. Services of one test file share
 * the file's database, like instances behind a load balancer. Behind HAProxy, `url` is the load
 * balancer's (on PORT when the overrides name one) and the instances' public base URL; `app` is the
 * first instance's, `jobs` every instance's runners as one (everyInstance); the clock, when given, is
 * every instance's.
 */
export async function startService(overrides: NodeJS.ProcessEnv = {}, clock?: Clock): Promise<TestService> {
  if (testTopology === "single") return startInstance(overrides, clock);
  const { PORT: port, ...instanceOverrides } = overrides;
  const lbPort = port === undefined || port === "0" ? await freePort() : Number(port);
  const instances = await startTogether(
    Array.from(
      { length: instancesBehindLoadBalancer },
      () => () =>
        // Three pools per test file on a shared server: a smaller pool each keeps the suite under max_connections.
        startInstance(
          { DATABASE_POOL_SIZE: "4", PUBLIC_BASE_URL: `http://localhost:${lbPort}`, TRUSTED_PROXIES: "127.0.0.1", ...instanceOverrides },
          clock,
        ),
    ),
  );
  const closeInstances = (timing?: ShutdownTiming) => Promise.all(instances.map((instance) => instance.close(timing)));
  let balancer: LoadBalancer;
  try {
    balancer = await startLoadBalancer(
      instances.map((instance) => instance.url),
      lbPort,
    );
  } catch (error) {
    await closeInstances();
    throw error;
  }
  const first = instances[0]!;
  return {
    url: balancer.url,
    opsUrl: first.opsUrl,
    app: first.app,
    jobs: everyInstance(instances.map((instance) => instance.jobs)),
    async close(timing) {
      await balancer.close();
      await closeInstances(timing);
    },
  };
}
