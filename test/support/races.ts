import { afterAll, beforeAll } from "vitest";
import type { Clock } from "../../src/clock.js";
import type { RestResponse } from "./clients.js";
import { rows } from "./database.js";
import { startService, type TestService } from "./service.js";

/*
 * What the suites that race two instances on one PostgreSQL database share: the two instances, the
 * deadlock count they check, and the one-line account of racing answers their failure messages print.
 */

/** Two instances of the service on the test file's database, as behind a load balancer. */
export interface ServicePair {
  readonly a: TestService;
  readonly b: TestService;
  /** Instance i % 2, so racing calls land on both instances. */
  instance(i: number): TestService;
}

/** Stands for a service that starts later (in beforeAll), so a describe can name it where it declares it. */
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
    get app() {
      return service().app;
    },
    get jobs() {
      return service().jobs;
    },
    close: () => service().close(),
  };
}

/**
 * Two instances started with the same overrides (and clock) before the tests of the calling describe
 * and closed after them; they share the file's database, so racing calls can be sent to both.
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

/** Transactions PostgreSQL has aborted as deadlock victims in the file's database: racing calls must add none. */
export async function deadlocks(service: Pick<TestService, "app">): Promise<number> {
  const [row] = await rows<{ n: number }>(service.app.dataSource, "SELECT deadlocks::int AS n FROM pg_stat_database WHERE datname = current_database()");
  return row!.n;
}

/** A one-line account of racing responses for failure messages: HTTP status, and the object's status or the error code. */
export function summary(responses: RestResponse[]): string {
  return responses.map((r) => `${r.status} ${r.body?.error?.code ?? r.body?.status}`).join(", ");
}
