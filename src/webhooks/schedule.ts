/** How long a failing delivery is retried before it is marked failed (decisions §8: 3 days). */
export const retryWindowMs = 3 * 86_400_000;

/** The longest wait between two attempts, so a receiver back after a long outage hears soon. */
const longestDelayMs = 6 * 3_600_000;

/**
 * The wait before the next attempt after `attempts` failed ones: about 10 s, doubling each time up to
 * 6 hours, spread by ±20 % so that the deliveries that failed together during an outage do not all
 * come back at the same instant when the receiver recovers.
 */
export function retryDelayMs(attempts: number, random: () => number = Math.random): number {
  const base = Math.min(10_000 * 2 ** Math.max(0, attempts - 1), longestDelayMs);
  return Math.round(base * (0.8 + 0.4 * random()));
}

/**
 * `INSERT … SELECT` of the deliveries of the events a data-modifying CTE named `events` wrote (it
 * returns event_id, merchant_id, livemode, profile_id and created): one per event whose profile has a
 * webhook_url, due at once. Part of the statement that writes the events, so that an event and its
 * delivery commit together.
 */
export function deliveriesOf(events: string): string {
  return (
    `INSERT INTO webhook_deliveries (event_id, merchant_id, livemode, profile_id, status, attempts, next_attempt_at, deliver_until, created) ` +
    `SELECT e.event_id, e.merchant_id, e.livemode, e.profile_id, 'pending', 0, e.created, e.created + interval '${retryWindowMs / 1000} seconds', e.created ` +
    `FROM ${events} AS e JOIN profiles AS p ON p.profile_id = e.profile_id WHERE p.webhook_url IS NOT NULL`
  );
}

/** What the CTE writing events returns for `deliveriesOf`. */
export const eventsReturning = "event_id, merchant_id, livemode, profile_id, created";
