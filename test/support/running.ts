import { afterAll, beforeAll } from "vitest";
import type { Clock } from "../../src/clock.js";
import { startService, type TestService } from "./service.js";

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

/** The service (startService with these overrides and clock) for the tests of the calling file or describe. */
export function runningService(overrides: NodeJS.ProcessEnv = {}, clock?: Clock): TestService {
  let running: TestService | undefined;
  beforeAll(async () => {
    running = await startService(overrides, clock);
  });
  afterAll(async () => {
    await running?.close();
  });
  return startedLater(() => running);
}

/** Two instances of the service on the test file's database, as behind a load balancer. */
export interface ServicePair {
  readonly a: TestService;
  readonly b: TestService;
  /** Instance i % 2, so racing calls land on both instances. */
  instance(i: number): TestService;
}

/**
 * Two instances started at once with the same overrides (and clock) for the tests of the calling
 * describe; they share the file's database, so racing calls can be sent to both.
 */
export function servicePair(overrides: NodeJS.ProcessEnv = {}, clock?: Clock): ServicePair {
  let started: [TestService, TestService] | undefined;
  beforeAll(async () => {
    started = await Promise.all([startService(overrides, clock), startService(overrides, clock)]);
  });
  afterAll(async () => {
    await Promise.all(started?.map((service) => service.close()) ?? []);
  });
  const a = startedLater(() => started?.[0]);
  const b = startedLater(() => started?.[1]);
  return { a, b, instance: (i) => (i % 2 === 0 ? a : b) };
}
