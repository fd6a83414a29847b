import type { AddressInfo } from "node:net";
import type { DescFile } from "@bufbuild/protobuf";
import type { ConnectRouterOptions, Interceptor } from "@connectrpc/connect";
import { compressionGzip } from "@connectrpc/connect-node";
import type { DataSource } from "typeorm";
import { BalanceReportSchema } from "../gen/paymentservice/v1/balance_pb.js";
import { KeyCache } from "./api-keys/key-cache.js";
import { InvalidKeys } from "./api-keys/invalid-keys.js";
import { KeyLookup } from "./api-keys/lookup.js";
import { ApiKeyHasher, apiKeyHashSecret } from "./auth/api-key-secret.js";
import { createAuthenticator, publishableKeyMayCall } from "./auth/authenticate.js";
import { systemClock, type Clock } from "./clock.js";
import { SandboxTestClock } from "./test-clock.js";
import type { Config } from "./config.js";
import { openDataSource } from "./db/data-source.js";
import { entities } from "./entities.js";
import { migrations } from "./migrations/index.js";
import { type DatabaseTimeouts, poolOf, waitingForConnections } from "./db/pool.js";
import { InstanceLiveness } from "./db/liveness.js";
import { ObjectClaims } from "./objects/claims.js";
import { ObjectWriter } from "./objects/writer.js";
import { useNamedStatements } from "./db/prepared.js";
import { UnitOfWork } from "./db/unit-of-work.js";
import { JobRunner } from "./jobs/runner.js";
import { EventFeed } from "./events/feed.js";
import { DeliveryThread, type WebhookSender } from "./webhooks/delivery-thread.js";
import { WebhookDispatcher } from "./webhooks/dispatcher.js";
import { createAuthenticationPages } from "./payments/authentication-page.js";
import { createApiDescriptionPages } from "./openapi/pages.js";
import { createProbePages } from "./health/probes.js";
import { authenticationPath } from "./payments/attempts.js";
import { paymentJobHandlers, type PaymentJobDependencies } from "./payments/jobs.js";
import { leftAttemptsIntervalMs, settleLeftAttempts } from "./payments/operation.js";
import { refundJobHandlers, type RefundJobDependencies } from "./refunds/jobs.js";
import { disputeJobHandlers } from "./disputes/jobs.js";
import { payoutJobHandlers, type PayoutJobDependencies } from "./payouts/jobs.js";
import { ProcessorRegistry } from "./processors/registry.js";
import { SandboxProcessor } from "./processors/sandbox.js";
import { SandboxCallBooks } from "./processors/sandbox-books.js";
import { sandboxPayoutRails } from "./processors/sandbox-payouts.js";
import { DataCipher, dataEncryptionKey } from "./secrets/data-cipher.js";
import { resolveServerSecret } from "./secrets/server-secret.js";
import { AuthFailureLimiter } from "./rate-limits/auth-failures.js";
import { MemoryCounter, type WindowCounter } from "./rate-limits/counter.js";
import { createIdempotencyInterceptor, type IdempotencyDependencies } from "./idempotency/interceptor.js";
import { eventReapIntervalMs, reapOldEvents } from "./events/retention.js";
import { reapExpiredKeys } from "./idempotency/store.js";
import { reapExpiredTokens } from "./payment-methods/store.js";
import { reapSandboxBooks } from "./processors/sandbox-books.js";
import { RateLimiter } from "./rate-limits/limiter.js";
import { RedisCounter } from "./rate-limits/redis-counter.js";
import { startEmbeddedDatabase, type EmbeddedDatabase } from "./db/embedded.js";
import { listCountsMergeIntervalMs, mergeListCounts } from "./db/list-counts.js";
import { balanceTotalsMergeIntervalMs, mergeBalanceTotals } from "./ledger/totals.js";
import { csvMediaType, reportCsv } from "./ledger/view.js";
import { renderingOf } from "./transport/rest/renderings.js";
import { refreshStatistics, statisticsCheckIntervalMs } from "./db/statistics.js";
import routes from "./routes.js";
import { createDualProtocolServer, type DualProtocolHandler } from "./transport/listener.js";
import { ApiRouter } from "./transport/api-router.js";
import { createNodeHandler } from "./transport/node-handler.js";
import { startTracing, type Tracing } from "./transport/tracing.js";
import { RequestRecord } from "./transport/request-record.js";
import { createAdmission } from "./transport/admission.js";
import { ClientAddresses } from "./transport/client-address.js";
import { CorsPolicy } from "./transport/cors.js";
import { deadlineInterceptor } from "./transport/deadline-interceptor.js";
import { outcomeInterceptor } from "./transport/outcome-interceptor.js";
import { isReflectionMethod, registerReflection } from "./transport/reflection.js";
import { errorTypeFiles } from "./transport/errors.js";
import { Health } from "../gen/grpc/health/v1/health_pb.js";
import { grpcHealthService, isGrpcHealthMethod } from "./health/grpc-health.js";
import { ProbeConnection } from "./health/probe-connection.js";
import { Readiness } from "./health/readiness.js";
import { createRequestRulesInterceptor } from "./transport/request-rules.js";
import { rpcJsonOptions } from "./transport/rpc-json.js";
import { ServiceMetrics } from "./metrics/service-metrics.js";
import { openOpsListener } from "./transport/ops-listener.js";

/**
 * Everything one instance opens at start-up, built here and nowhere else. No module reaches into it:
 * each resource's factory is handed the app and takes, by its own small interface
 * (PaymentDependencies, RefundDependencies, …), only what it names.
 */
export interface App {
  readonly config: Config;
  readonly dataSource: DataSource;
  readonly clock: Clock;
  readonly hasher: ApiKeyHasher;
  /** Finds the API key a request presents (cached per instance on PostgreSQL); a revocation waits on its `settled()`. */
  readonly keys: KeyLookup;
  /** Commits an API call's effect that needs a transaction, with its idempotent response when it has a key. */
  readonly units: UnitOfWork;
  /** Claims objects for operations that call a processor, those of concurrent calls together. */
  readonly claims: ObjectClaims;
  /** Writes new and claimed objects, those of concurrent calls and jobs together (one statement, one commit). */
  readonly writer: ObjectWriter;
  /** Encrypts what must be kept but never in clear (payout destinations). */
  readonly dataCipher: DataCipher;
  /** The payment and payout processors this instance can use. */
  readonly processors: ProcessorRegistry;
  /** How long a scheduled refund waits for the settlement run. */
  readonly scheduledRefundDelayMs: number;
  /** How long events are kept. */
  readonly eventRetentionMs: number;
  /** The embedded database, when DATABASE_URL is unset. */
  readonly embedded: EmbeddedDatabase | undefined;
  /** Base of URLs handed to browsers: PUBLIC_BASE_URL, or this instance's own port on localhost. */
  readonly publicBaseUrl: string;
  /** This instance's job runner; serve() registers the handlers and starts it. */
  readonly jobs: JobRunner;
  /** Sends events to webhook_urls, in a thread of its own unless a clock is injected; serve() starts it. */
  readonly webhooks: WebhookSender;
  /** Word of committed events, for this instance's event streams. */
  readonly eventFeed: EventFeed;
  /** The shared sandbox test clock, when SANDBOX_TEST_CLOCK=true (it is then also `clock`). */
  readonly testClock: SandboxTestClock | undefined;
  /** The request counters of every limit: in Redis when REDIS_URL is set, else in this process. */
  readonly rateCounter: WindowCounter;
  /** Per-key request counting. */
  readonly rateLimiter: RateLimiter;
  /** Failed authentications per client address, refusing an address over its limit before the database. */
  readonly authFailures: AuthFailureLimiter;
  /** Admin API calls per client address. */
  readonly adminLimiter: RateLimiter;
  /** Card tokenizations and confirmations with a publishable key per client address (card testing). */
  readonly cardTestingLimiter: RateLimiter;
  /** While held, this instance's leases are its own; once it is gone they can be taken over at once. */
  readonly liveness: InstanceLiveness;
  /** This instance's Prometheus metrics, scraped on the operators' port (OPS_PORT). */
  readonly metrics: ServiceMetrics;
  /** A server span per call, sent over OTLP, when OTEL_EXPORTER_OTLP_ENDPOINT is set. */
  readonly tracing: Tracing | undefined;
}

/** A service listening on its port. */
export interface RunningService {
  readonly app: App;
  /** Base URL of the port, e.g. http://127.0.0.1:8080. */
  readonly url: string;
  /** Base URL of the operators' port (/metrics and the probes), when OPS_PORT is set. */
  readonly opsUrl: string | undefined;
  /**
   * Shuts the instance down in the order a load balancer needs (docs/operations.md): not ready at
   * once, still serving for `drainDelayMs` while the balancer notices, then no new connections and
   * the calls in flight given `graceMs` to finish, while the job runner and the webhook sender end
   * only what they have begun and hand the rest back.
   */
  close(timing?: ShutdownTiming): Promise<void>;
}

/** How long each step of a shutdown may take (SHUTDOWN_DELAY_MS, SHUTDOWN_GRACE_MS). */
export interface ShutdownTiming {
  readonly drainDelayMs: number;
  readonly graceMs: number;
}

/** Largest RPC message accepted; payment requests are a few kilobytes. */
const readMaxBytes = 1024 * 1024;

/**
 * Longest deadline a client may set: the longest timer Node keeps (about 24.8 days). A longer one
 * would fire at once, so it is refused (IR_06) rather than honoured wrongly.
 */
const maxTimeoutMs = 2 ** 31 - 1;

/** The waits on PostgreSQL the configuration allows, as the pools take them. */
function databaseTimeouts(config: Config): DatabaseTimeouts {
  return {
    connectTimeoutMs: config.databaseConnectTimeoutMs,
    statementTimeoutMs: config.databaseStatementTimeoutMs,
    lockTimeoutMs: config.databaseLockTimeoutMs,
    idleInTransactionTimeoutMs: config.databaseIdleInTransactionTimeoutMs,
  };
}

/** What tests give openApp beside the configuration. */
export interface OpenOptions {
  /** The clock, instead of the shared sandbox test clock or the system clock. */
  readonly clock?: Clock;
  /** A snapshot (EmbeddedDatabase.snapshot) an in-memory embedded database starts from. */
  readonly embeddedTemplate?: Blob;
}

/**
 * Opens the database (starting the embedded one if needed) and runs pending migrations, or with
 * MIGRATE_ON_START=false refuses to open one that has any. Time comes from `options.clock`
 * (tests), else the shared sandbox test clock when enabled, else the system clock.
 */
export async function openApp(config: Config, options: OpenOptions = {}): Promise<App> {
  // First: the pg instrumentation must patch pg before the pool makes its first connection.
  const tracing = await startTracing(config.tracesEndpoint);
  // Before anything is written under DATA_DIR: the embedded database takes its owner lock first.
  const embedded =
    config.databaseUrl === undefined
      ? await startEmbeddedDatabase(config.dataDir, config.databasePoolSize, options.embeddedTemplate)
      : undefined;
  try {
    const embeddedDataDir = config.databaseUrl === undefined ? config.dataDir : undefined;
    const hashSecret = await resolveServerSecret(apiKeyHashSecret, config.apiKeyHashSecret, embeddedDataDir);
    const dataKey = await resolveServerSecret(dataEncryptionKey, config.dataEncryptionKey, embeddedDataDir);
    // A rotation's other secrets come only beside configured current ones (loadConfig), so are parsed as they are.
    const rotatingHashSecrets = {
      previous: config.apiKeyHashPreviousSecret === undefined ? undefined : apiKeyHashSecret.parse(config.apiKeyHashPreviousSecret),
      next: config.apiKeyHashNextSecret === undefined ? undefined : apiKeyHashSecret.parse(config.apiKeyHashNextSecret),
    };
    const decryptOnlyKeys = [
      ...config.dataEncryptionPreviousKeys,
      ...(config.dataEncryptionNextKey === undefined ? [] : [config.dataEncryptionNextKey]),
    ].map((key) => dataEncryptionKey.parse(key));
    const timeouts = databaseTimeouts(config);
    const dataSource = await openDataSource(config.databaseUrl ?? embedded!.url, config.databasePoolSize, timeouts, config.migrateOnStart, {
      entities,
      migrations,
    });
    // The embedded database serves every connection from one session, where names would clash.
    const namedStatements = embedded === undefined;
    if (namedStatements) useNamedStatements(dataSource);
    const liveness = await InstanceLiveness.open(dataSource, config.databaseUrl ?? embedded!.url);
    const publicBaseUrl = config.publicBaseUrl ?? `http://localhost:${config.port}`;
    const testClock = options.clock === undefined && config.sandboxTestClock ? new SandboxTestClock(poolOf(dataSource)) : undefined;
    await testClock?.refresh();
    const clock = options.clock ?? testClock ?? systemClock;
    const units = new UnitOfWork(dataSource);
    const metrics = new ServiceMetrics(dataSource, clock, config.databaseUrl ?? embedded!.url);
    const jobs = new JobRunner(
      dataSource,
      clock,
      { pollMs: config.jobPollMs, maxAttempts: config.jobMaxAttempts },
      {
        beforePass: () => testClock?.refresh(),
        failed: (kind) => metrics.jobFailed(kind),
      },
    );
    // An injected clock (tests) lives in this thread's memory, so its dispatcher runs here to read it.
    const webhooks =
      options.clock === undefined
        ? new DeliveryThread({
            databaseUrl: config.databaseUrl ?? embedded!.url,
            sandboxTestClock: config.sandboxTestClock,
            perEndpoint: config.webhookEndpointConcurrency,
            attemptTimeoutMs: config.webhookAttemptTimeoutMs,
            namedStatements,
            timeouts,
          })
        : new WebhookDispatcher(poolOf(dataSource), clock, {
            perEndpoint: config.webhookEndpointConcurrency,
            attemptTimeoutMs: config.webhookAttemptTimeoutMs,
            namedStatements,
          });
    const localCounter = new MemoryCounter(() => clock.now().getTime());
    const counter =
      config.redisUrl === undefined ? localCounter : new RedisCounter(config.redisUrl, localCounter, () => metrics.rateLimitFellBack());
    const hasher = new ApiKeyHasher(hashSecret, rotatingHashSecrets);
    return {
      config,
      dataSource,
      clock,
      hasher,
      keys: new KeyLookup(
        dataSource,
        config.databaseUrl === undefined ? undefined : new KeyCache(config.databaseUrl),
        new InvalidKeys(config.invalidKeyCacheSeconds * 1000, () => clock.now().getTime()),
        hasher.secretId,
      ),
      units,
      claims: new ObjectClaims(dataSource, clock),
      writer: new ObjectWriter(dataSource, clock, webhooks),
      dataCipher: new DataCipher(dataKey, decryptOnlyKeys),
      processors: new ProcessorRegistry(new SandboxProcessor(new SandboxCallBooks(dataSource), clock), sandboxPayoutRails(dataSource)),
      scheduledRefundDelayMs: config.scheduledRefundDelaySeconds * 1000,
      eventRetentionMs: config.eventRetentionDays * 86_400_000,
      embedded,
      publicBaseUrl,
      jobs,
      webhooks,
      eventFeed: new EventFeed(config.databaseUrl ?? embedded!.url, config.databaseConnectTimeoutMs),
      testClock,
      rateCounter: counter,
      rateLimiter: new RateLimiter(config.rateLimitPerMinute, counter, clock),
      authFailures: new AuthFailureLimiter(
        new RateLimiter(config.authFailureLimitPerMinute, counter, clock, "failed_authentication"),
        clock,
      ),
      adminLimiter: new RateLimiter(config.adminRateLimitPerMinute, counter, clock, "admin"),
      cardTestingLimiter: new RateLimiter(config.cardTestingLimitPerMinute, counter, clock, "card_testing"),
      liveness,
      metrics,
      tracing,
    };
  } catch (error) {
    await embedded?.close();
    await tracing?.shutdown();
    throw error;
  }
}

/** Releases the database connections and stops the embedded database. */
export async function closeApp(app: App): Promise<void> {
  await app.eventFeed.close();
  await app.rateCounter.close();
  await app.keys.close();
  await app.dataSource.destroy();
  await app.liveness.close();
  await app.embedded?.close();
  await app.tracing?.shutdown();
}

/** How the router reads calls: compression, the largest message, the longest deadline, strict JSON. */
export const routerOptions: Omit<ConnectRouterOptions, "interceptors"> = {
  acceptCompression: [compressionGzip],
  readMaxBytes,
  maxTimeoutMs,
  jsonOptions: rpcJsonOptions,
};

/**
 * The interceptors that shape every call whatever it runs, outermost first: documented errors and
 * the request's record, the client's deadline, the request rules. The protocol parity suite stands
 * them in front of its stub services.
 */
export function callInterceptors(): Interceptor[] {
  return [outcomeInterceptor, deadlineInterceptor, createRequestRulesInterceptor()];
}

/**
 * The interceptors every call goes through, outermost first: callInterceptors, then idempotency
 * keys. Shared with in-process tests.
 */
export function apiInterceptors(deps: IdempotencyDependencies): Interceptor[] {
  return [...callInterceptors(), createIdempotencyInterceptor(deps)];
}

/** How often each instance reaps expired idempotency keys: often enough that each run stays short. */
const idempotencyReapIntervalMs = 10_000;

/** How often each instance removes the client-side tokens that expired unattached. */
const tokenReapIntervalMs = 60_000;

/** How often each instance removes the sandbox processor's books of calls a week old. */
const sandboxBooksReapIntervalMs = 3_600_000;

/** Registers every resource's job handlers and the upkeep with a job runner. Shared with in-process tests. */
export function registerJobs(
  runner: JobRunner,
  deps: PaymentJobDependencies &
    RefundJobDependencies &
    PayoutJobDependencies & { readonly clock: Clock; readonly eventRetentionMs: number },
): void {
  runner.register(paymentJobHandlers(deps));
  runner.register(refundJobHandlers(deps));
  runner.register(disputeJobHandlers(deps));
  runner.register(payoutJobHandlers(deps));
  runner.every(leftAttemptsIntervalMs, () => settleLeftAttempts(deps));
  runner.every(idempotencyReapIntervalMs, () => reapExpiredKeys(deps.dataSource, deps.clock.now()));
  runner.every(tokenReapIntervalMs, () => reapExpiredTokens(deps.dataSource.manager, deps.clock.now()));
  runner.every(sandboxBooksReapIntervalMs, () => reapSandboxBooks(deps.dataSource));
  runner.every(statisticsCheckIntervalMs, () => refreshStatistics(deps.dataSource));
  runner.every(listCountsMergeIntervalMs, () => mergeListCounts(deps.dataSource));
  runner.every(balanceTotalsMergeIntervalMs, () => mergeBalanceTotals(deps.dataSource, deps.clock.now()));
  runner.every(eventReapIntervalMs, () => reapOldEvents(deps.dataSource, new Date(deps.clock.now().getTime() - deps.eventRetentionMs)));
}

/**
 * Serves the app on config.port (0 picks a free port): REST, Connect, gRPC, gRPC-Web, reflection,
 * the standard gRPC health service, the 3DS pages and the API's description (/openapi.json, /docs);
 * and runs due jobs in the background.
 */
export async function serve(opened: App): Promise<RunningService> {
  // Bind first: with PORT=0 the port, and so the default public URL, is known only then.
  let handle: DualProtocolHandler = (_req, res) => {
    res.statusCode = 503;
    res.end();
  };
  const { config } = opened;
  const listener = createDualProtocolServer((req, res) => handle(req, res), {
    idleTimeoutMs: config.idleTimeoutMs,
    headersTimeoutMs: config.headersTimeoutMs,
    requestTimeoutMs: config.requestTimeoutMs,
    maxConnections: config.maxConnections,
    maxConcurrentStreams: config.http2MaxConcurrentStreams,
    onRefused(status) {
      // Logged and counted as the handler would: IR_06, no route, nothing of the request kept.
      const record = new RequestRecord();
      record.answered("IR_06");
      record.log(undefined, "", status, true);
      opened.metrics.requestEnded(record);
      return record.id;
    },
  });
  await new Promise<void>((resolve, reject) => {
    listener.server.once("error", reject);
    listener.server.listen(opened.config.port, "0.0.0.0", () => resolve());
  });
  const { port } = listener.server.address() as AddressInfo;
  const app: App = opened.config.publicBaseUrl === undefined ? { ...opened, publicBaseUrl: `http://localhost:${port}` } : opened;

  const router = new ApiRouter({ ...routerOptions, interceptors: apiInterceptors(app) });
  routes(router, app);
  // The embedded database belongs to this one instance, with no load balancer to mislead: its pool will do.
  const probeConnection = app.config.databaseUrl === undefined ? undefined : new ProbeConnection(app.config.databaseUrl);
  const readiness = new Readiness(
    probeConnection ?? app.dataSource,
    migrations.map((Migration) => new Migration().name),
  );
  // Read at the first health call, when every service (reflection's too) is registered.
  let served: ReadonlySet<string> | undefined;
  router.service(
    Health,
    grpcHealthService(readiness, () => (served ??= new Set(router.handlers.map((h) => h.service.typeName)))),
  );
  registerReflection(router, [...new Set<DescFile>(router.handlers.map((h) => h.service.file)), ...errorTypeFiles]);
  const admit = createAdmission({
    authenticate: createAuthenticator({
      adminApiKey: app.config.adminApiKey,
      hasher: app.hasher,
      clock: app.clock,
      failures: app.authFailures,
      findKey: (hashes, beforeDatabase) => app.keys.find(hashes, beforeDatabase),
    }),
    rateLimiter: app.rateLimiter,
    adminLimiter: app.adminLimiter,
    cardTestingLimiter: app.cardTestingLimiter,
    isPublic: (method) => isReflectionMethod(method) || isGrpcHealthMethod(method),
    databaseSaturated: () => waitingForConnections(app.dataSource) >= app.config.databaseMaxWaiting,
  });
  handle = createNodeHandler({
    router,
    pages: [
      { prefix: authenticationPath, handler: createAuthenticationPages(app) },
      ...createApiDescriptionPages(),
      ...createProbePages(readiness),
    ],
    admit,
    clients: new ClientAddresses(app.config.trustedProxies),
    cors:
      app.config.corsAllowedOrigins.length === 0
        ? undefined
        : { policy: new CorsPolicy(app.config.corsAllowedOrigins), browserCallable: publishableKeyMayCall },
    onEnded: (record) => app.metrics.requestEnded(record),
    tracing: app.tracing,
    renderings: new Map([renderingOf(BalanceReportSchema, csvMediaType, reportCsv)]),
  });
  const ops =
    app.config.opsPort === undefined
      ? undefined
      : await openOpsListener(
          app.config.opsPort,
          async () => ({ contentType: app.metrics.registry.contentType, text: await app.metrics.scrape() }),
          createProbePages(readiness),
        );

  registerJobs(app.jobs, app);
  app.jobs.start();
  app.webhooks.start();
  return {
    app,
    url: `http://127.0.0.1:${port}`,
    opsUrl: ops?.url,
    async close({ drainDelayMs, graceMs }: ShutdownTiming = { drainDelayMs: 0, graceMs: 5_000 }) {
      readiness.beginClosing();
      if (drainDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, drainDelayMs));
      await Promise.all([listener.close(graceMs), app.webhooks.stop(), app.jobs.stop()]);
      // Last: until the API port has closed, the operators' /readyz reports the drain.
      await ops?.close();
      await probeConnection?.close();
    },
  };
}
