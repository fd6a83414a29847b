import type { EntityManager } from "typeorm";

/** How long a failing delivery is retried before it is marked failed (decisions §8: 3 days). */
export const retryWindowMs = 3 * 86_400_000;

/** The longest wait between two attempts, so a receiver back after a long outage hears soon. */
const longestDelaySeconds = 6 * 3600;

/**
 * SQL for when a failed attempt is tried again: `after` plus about 10 s, doubling with each earlier
 * failure of the window (`failedBefore`, an SQL integer) up to 6 hours, spread by `spread` (an SQL
 * number from 0.8 to 1.2, drawn per attempt) so that the deliveries that failed together during an
 * outage do not all come back at the same instant when the receiver recovers. It is worked out as the
 * outcome is written, from the window the row has then: a redelivery meanwhile starts a new one.
 */
export function retryAtSql(after: string, failedBefore: string, spread: string): string {
  // Whole milliseconds, as the API shows it: a retry is due at the very time the event says.
  return `date_trunc('milliseconds', ${after} + make_interval(secs => least(10 * power(2, ${failedBefore}), ${longestDelaySeconds}) * ${spread}))`;
}

/** A factor from 0.8 to 1.2 that spreads one retry's wait. */
export function retrySpread(random: () => number = Math.random): number {
  return 0.8 + 0.4 * random();
}

/**
 * `INSERT … SELECT` of the deliveries of the events a data-modifying CTE named `events` wrote (it
 * returns event_id, merchant_id, livemode, profile_id and created): one per event whose profile has a
 * webhook_url, due at once. Part of the statement that writes the events, so that an event and its
 * delivery commit together.
 */
export function deliveriesSql(events: string): string {
  return (
    `INSERT INTO webhook_deliveries (event_id, merchant_id, livemode, profile_id, status, attempts, window_attempts, next_attempt_at, deliver_until, created) ` +
    `SELECT e.event_id, e.merchant_id, e.livemode, e.profile_id, 'pending', 0, 0, e.created, e.created + interval '${retryWindowMs / 1000} seconds', e.created ` +
    `FROM ${events} AS e JOIN profiles AS p ON p.profile_id = e.profile_id WHERE p.webhook_url IS NOT NULL`
  );
}

/** What the CTE writing events returns for `deliveriesOf`. */
export const eventsReturning = "event_id, merchant_id, livemode, profile_id, created";

/**
 * Makes an event's delivery due at `now` with a fresh retry window, whatever became of it before; an
 * event whose profile had no webhook_url when it was written gets its first delivery. A lease an
 * instance holds is left alone, so one attempt at a time ever goes out.
 */
export async function redeliver(
  em: EntityManager,
  event: { readonly eventId: string; readonly merchantId: string; readonly livemode: boolean; readonly profileId: string },
  now: Date,
): Promise<void> {
  await em.query(
    `INSERT INTO webhook_deliveries (event_id, merchant_id, livemode, profile_id, status, attempts, window_attempts, next_attempt_at, deliver_until, created)
     VALUES ($1, $2, $3, $4, 'pending', 0, 0, $5, $6, $5)
     ON CONFLICT (event_id) DO UPDATE SET status = 'pending', window_attempts = 0, next_attempt_at = $5, deliver_until = $6`,
    [event.eventId, event.merchantId, event.livemode, event.profileId, now, new Date(now.getTime() + retryWindowMs)],
  );
}
