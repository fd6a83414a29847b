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
 * returns `eventsReturning`): one per event whose profile has a webhook_url, due at once, returning
 * their event and profile ids. Part of the statement that writes the events, so that an event and its
 * delivery commit together. `leasedUntil` (an SQL expression, NULL for none) is the lease of the
 * instance that sends them once they commit (`DeliveryHandOff`).
 */
export function deliveriesSql(events: string, leasedUntil = "NULL"): string {
  return (
    `INSERT INTO webhook_deliveries (event_id, merchant_id, livemode, profile_id, status, attempts, window_attempts, next_attempt_at, deliver_until, created, leased_until) ` +
    `SELECT e.event_id, e.merchant_id, e.livemode, e.profile_id, 'pending', 0, 0, e.created, e.created + interval '${retryWindowMs / 1000} seconds', e.created, ${leasedUntil} ` +
    `FROM ${events} AS e JOIN profiles AS p ON p.profile_id = e.profile_id WHERE p.webhook_url IS NOT NULL RETURNING event_id, profile_id`
  );
}

/** What the CTE writing events returns for `deliveriesSql`. */
export const eventsReturning = "event_id, merchant_id, livemode, profile_id, created";

/**
 * What the CTE writing events returns for `deliveriesSql` and `handedOverSql` too: the type and data
 * only a statement that hands its deliveries over reads, so a status change does not return them.
 */
export const handedOverEventsReturning = `${eventsReturning}, type, data`;

/**
 * A JSON array (as text) of what sending each delivery the CTE `deliveries` wrote needs, from the CTE
 * `events` that wrote their events (returning `handedOverEventsReturning`) and their profiles as they are now: the same fields a look for due
 * deliveries reads (`HandedOver`), so that the sender this instance hands them to reads nothing.
 */
export function handedOverSql(deliveries: string, events: string): string {
  return (
    `SELECT json_agg(json_build_object('event_id', e.event_id, 'livemode', e.livemode, 'profile_id', e.profile_id, ` +
    `'type', e.type, 'created', e.created, 'data', e.data, 'webhook_url', p.webhook_url, 'webhook_secret', p.webhook_secret, ` +
    `'previous_webhook_secret', p.previous_webhook_secret, 'previous_webhook_secret_until', p.previous_webhook_secret_until))::text ` +
    `FROM ${deliveries} AS d JOIN ${events} AS e ON e.event_id = d.event_id JOIN profiles AS p ON p.profile_id = d.profile_id`
  );
}

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
