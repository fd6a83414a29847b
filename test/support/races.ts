import type { RestResponse } from "./clients.js";
import { rows } from "./database.js";
import type { TestService } from "./service.js";

/*
 * What the suites that race calls on one PostgreSQL database share (servicePair in running.ts starts
 * the two instances): the deadlock count they check, and the one-line account of racing answers
 * their failure messages print.
 */

/** Transactions PostgreSQL has aborted as deadlock victims in the file's database: racing calls must add none. */
export async function deadlocks(service: Pick<TestService, "app">): Promise<number> {
  const [row] = await rows<{ n: number }>(
    service.app.dataSource,
    "SELECT deadlocks::int AS n FROM pg_stat_database WHERE datname = current_database()",
  );
  return row!.n;
}

/** A one-line account of racing responses for failure messages: HTTP status, and the object's status or the error code. */
export function summary(responses: RestResponse[]): string {
  return responses.map((r) => `${r.status} ${r.body?.error?.code ?? r.body?.status}`).join(", ");
}
