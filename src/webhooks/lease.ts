import { randomInt } from "node:crypto";

/**
 * How long a lease on deliveries holds, for attempts of at most `attemptTimeoutMs`: four attempts'
 * time, one after another, and the write of the outcome (70 s for the default 10 s attempts). A
 * delivery waits behind at most its profile's batch (`2 × perEndpoint`) and those being sent
 * (`perEndpoint` at a time), so at most three rounds of attempts go out before its own.
 */
export function leaseMsFor(attemptTimeoutMs: number): number {
  return 4 * attemptTimeoutMs + 30_000;
}

/**
 * A lease starting `now` and lasting `leaseMs`: when it ends, as an ISO timestamp to the microsecond, a random one within
 * its millisecond. It is the token its deliveries (those of one take, or of one write of new events)
 * are written and given back with, so it names that take or write alone: two of different
 * instances ending in the same millisecond share it one time in a thousand, and even then only one
 * whose answer was lost gives back by it.
 */
export function newLease(now: Date, leaseMs: number): string {
  return new Date(now.getTime() + leaseMs).toISOString().replace("Z", `${String(randomInt(1000)).padStart(3, "0")}Z`);
}
