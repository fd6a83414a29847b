import type { DescService } from "@bufbuild/protobuf";
import { createClient, createRouterTransport, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { afterAll, beforeAll, beforeEach } from "vitest";
import { MerchantService } from "../../gen/paymentservice/v1/merchant_pb.js";
import { apiInterceptors, closeApp, registerJobs, routerOptions, type App } from "../../src/app.js";
import { callerKey, type Caller, type MerchantCaller } from "../../src/auth/caller.js";
import { newId } from "../../src/ids.js";
import type { JobRunner } from "../../src/jobs/runner.js";
import type { Processor } from "../../src/processors/processor.js";
import { ProcessorRegistry } from "../../src/processors/registry.js";
import { sandboxPayoutRails } from "../../src/processors/sandbox-payouts.js";
import routes, { type ServiceDependencies } from "../../src/routes.js";
import { TestClock } from "./clock.js";
import { openTestApp } from "./service.js";

/*
 * The services in-process, without a port (connect's createRouterTransport, as connect-es tests its
 * interceptors): the one place that builds their dependencies for such a test, so a change to a
 * dependency interface touches this file only. Everything is the app's own wiring (openApp: the
 * database, migrations, unit of work, hasher, cipher) except what a test injects: the clock, and the
 * payment processor, handed to the ProcessorRegistry. The database is real: the embedded one as the
 * app opens it with DATABASE_URL unset, else this file's own clone of DATABASE_URL's database.
 *
 * Not exercised here: the port (protocol detection, REST transcoding, 3DS pages) and admission
 * (API keys, access rules, rate limits): a test names its caller instead, see `asCaller`.
 */

/** The services' dependencies in an in-process test: the app's, with the injected processor. */
export type InProcessDependencies = App & ServiceDependencies;

/** A merchant made for one test, and the sandbox caller its secret key would authenticate as. */
export interface InProcessMerchant {
  readonly merchantId: string;
  readonly profileId: string;
  readonly caller: MerchantCaller;
}

/** The services of one test file, in-process. */
export interface InProcessServices {
  readonly deps: InProcessDependencies;
  readonly clock: TestClock;
  /** The job runner with every resource's handlers; it never polls: tests run due jobs with runDue(). */
  readonly jobs: JobRunner;
  /** A client transport whose calls come from `caller`, through the app's interceptors. */
  transport(caller: Caller): Transport;
  /** A typed client of `service` whose calls come from `caller`. */
  client<S extends DescService>(service: S, caller: Caller): Client<S>;
  /** A fresh merchant (created as the operator would, through MerchantService) with its caller. */
  newMerchant(options?: { readonly livemode?: boolean; readonly publishable?: boolean }): Promise<InProcessMerchant>;
  close(): Promise<void>;
}

/** The operator, as the admin API key authenticates. */
export const adminCaller: Caller = { kind: "admin" };

/**
 * Stands in for admission (src/transport/admission.ts), which on the port authenticates the API key
 * and sets the caller before any interceptor runs; placed first, it sets the caller the test names.
 */
function asCaller(caller: Caller): Interceptor {
  return (next) => (req) => {
    req.contextValues.set(callerKey, caller);
    return next(req);
  };
}

/**
 * Opens the app's dependencies on a fresh database with `processor` as the processor of sandbox
 * payments (registered under its own name) and a TestClock, registers every job handler as serve()
 * does, and serves the routes through the app's interceptors, in serve()'s order.
 */
export async function startInProcess(processor: Processor, clock = new TestClock()): Promise<InProcessServices> {
  const app = await openTestApp(
    {
      // Nothing here goes through admission, so the rate limiter (Redis when set) is never asked.
      REDIS_URL: "",
      SANDBOX_TEST_CLOCK: "",
      PUBLIC_BASE_URL: "https://pay.example.test",
    },
    clock,
  );
  const deps: InProcessDependencies = { ...app, processors: new ProcessorRegistry(processor, sandboxPayoutRails(app.dataSource)) };
  registerJobs(deps.jobs, deps);
  const interceptors = apiInterceptors(deps);
  const transport = (caller: Caller): Transport =>
    createRouterTransport((router) => routes(router, deps), {
      router: { ...routerOptions, interceptors: [asCaller(caller), ...interceptors] },
    });
  const client = <S extends DescService>(service: S, caller: Caller): Client<S> => createClient(service, transport(caller));

  return {
    deps,
    clock,
    jobs: deps.jobs,
    transport,
    client,
    async newMerchant(options = {}) {
      const merchant = await client(MerchantService, adminCaller).createMerchant({ merchantName: "In-process merchant" });
      const caller: MerchantCaller = {
        kind: "merchant",
        merchantId: merchant.merchantId,
        livemode: options.livemode ?? false,
        publishable: options.publishable ?? false,
        keyId: newId("key"),
      };
      return { merchantId: merchant.merchantId, profileId: merchant.defaultProfileId, caller };
    },
    async close() {
      await deps.jobs.stop();
      await closeApp(app);
    },
  };
}

/** The in-process services of a test file, and the merchant each of its tests acts as. */
export interface InProcessSuite {
  readonly services: InProcessServices;
  /** A merchant made afresh for each test. */
  readonly merchant: InProcessMerchant;
  /** A client of `service` calling as this test's merchant. */
  client<S extends DescService>(service: S): Client<S>;
}

/**
 * Starts the in-process services with `processor` before the calling file's tests and closes them
 * after; before each test the processor forgets what it saw and a new merchant is made, so no test
 * sees another's payments or calls.
 */
export function inProcessSuite(processor: { reset(): void } & Processor): InProcessSuite {
  let services: InProcessServices | undefined;
  let merchant: InProcessMerchant | undefined;
  beforeAll(async () => {
    services = await startInProcess(processor);
  });
  afterAll(() => services?.close());
  beforeEach(async () => {
    processor.reset();
    merchant = await services!.newMerchant();
  });
  const started = () => {
    if (services === undefined || merchant === undefined)
      throw new Error("the in-process services are used before beforeAll and beforeEach ran");
    return { services, merchant };
  };
  return {
    get services() {
      return started().services;
    },
    get merchant() {
      return started().merchant;
    },
    client: (service) => started().services.client(service, started().merchant.caller),
  };
}
