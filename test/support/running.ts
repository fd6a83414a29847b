import { afterAll, beforeAll } from "vitest";
import type { Clock } from "../../src/clock.js";
import { startInstance, startService, startTogether, type TestService } from "./service.js";

/*
 * Services started before the tests of the calling file or describe and closed after them. Each is
 * named by a handle the caller can declare at once: it stands for the service once beforeAll has
 * started it, so tests read `service.url` without a `let` and hooks of their own.
 */

/** Stands for a service that starts later, in beforeAll; using it before that fails with that said. */
function startedLater(started: () => TestService | undefined): TestService {
  const service = (): TestService => {
    const running = started();
    if (running === undefined) throw new Error("the service is used before beforeAll started it");
    return running;
  };
  return {
    get url() {
      return service().url;
    },
    get opsUrl() {
      return service().opsUrl;
    },
    get app() {
      return service().app;
    },
    get jobs() {
      return service().jobs;
    },
    close: () => service().close(),
  };
}

/** Starts a service: startService (as TEST_TOPOLOGY says) or startInstance (one instance, always). */
type Start = (overrides: NodeJS.ProcessEnv, clock?: Clock) => Promise<TestService>;

function running(start: Start, overrides: NodeJS.ProcessEnv, clock: Clock | undefined): TestService {
  let started: TestService | undefined;
  beforeAll(async () => {
    started = await start(overrides, clock);
  });
  afterAll(async () => {
    await started?.close();
  });
  return startedLater(() => started);
}

/** The service (startService with these overrides and clock) for the tests of the calling file or describe. */
export function runningService(overrides: NodeJS.ProcessEnv = {}, clock?: Clock): TestService {
  return running(startService, overrides, clock);
}

/**
 * One instance (startInstance) for the tests of the calling file or describe, whatever TEST_TOPOLOGY
 * says: for tests that drive or watch that very instance, which say why where they call it.
 */
export function runningInstance(overrides: NodeJS.ProcessEnv = {}, clock?: Clock): TestService {
  return running(startInstance, overrides, clock);
}

/** Two instances of the service on the test file's database, as behind a load balancer. */
export interface ServicePair {
  readonly a: TestService;
  readonly b: TestService;
  /** Instance i % 2, so racing calls land on both instances. */
  instance(i: number): TestService;
}

function pair(start: Start, overrides: NodeJS.ProcessEnv, clock: Clock | undefined): ServicePair {
  let started: [TestService, TestService] | undefined;
  beforeAll(async () => {
    const [a, b] = await startTogether([() => start(overrides, clock), () => start(overrides, clock)]);
    started = [a!, b!];
  });
  afterAll(async () => {
    await Promise.all(started?.map((service) => service.close()) ?? []);
  });
  const a = startedLater(() => started?.[0]);
  const b = startedLater(() => started?.[1]);
  return { a, b, instance: (i) => (i % 2 === 0 ? a : b) };
}

/**
 * Two services started at once with the same overrides (and clock) for the tests of the calling
 * describe; they share the file's database, so racing calls can be sent to both. Behind HAProxy
 * (TEST_TOPOLOGY=haproxy) each is three instances behind a load balancer of its own.
 */
export function servicePair(overrides: NodeJS.ProcessEnv = {}, clock?: Clock): ServicePair {
  return pair(startService, overrides, clock);
}

/**
 * Two single instances (startInstance) whatever TEST_TOPOLOGY says: for tests that count or watch
 * what each instance does, which say why where they call it.
 */
export function instancePair(overrides: NodeJS.ProcessEnv = {}, clock?: Clock): ServicePair {
  return pair(startInstance, overrides, clock);
}
