import type { EntityManager } from "typeorm";
import type { HandedOver } from "./delivery-thread.js";

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
 * A JSON array (as text) of what sending each delivery the CTE `deliveries` wrote needs besides its
 * event, which its writer holds already: the event's id, and its profile's webhook_url and secrets
 * as they are now (`handedOver`). The event's data is never read back: building its JSON again
 * cost the database more than writing the delivery did.
 */
export function handedOverSql(deliveries: string): string {
  return (
    `SELECT json_agg(json_build_array(d.event_id, p.webhook_url, p.webhook_secret, p.previous_webhook_secret, p.previous_webhook_secret_until))::text ` +
    `FROM ${deliveries} AS d JOIN profiles AS p ON p.profile_id = d.profile_id`
  );
}

/** A delivery's row of `handedOverSql`. */
type HandedOverRow = [eventId: string, url: string | null, secret: string, previousSecret: string | null, previousUntil: string | null];

/** What a delivery handed over carries of its event (an events/event.entity.ts row): webhooks sit below events. */
export interface DeliveredEvent {
  readonly eventId: string;
  readonly livemode: boolean;
  readonly profileId: string | null;
  readonly type: string;
  readonly created: Date;
}

/**
 * The deliveries a statement wrote (`answer`, from `handedOverSql`) with what sending them needs:
 * each one's event among `events`, the ones the statement wrote, whose data were sent as `dataJson`.
 */
export function handedOver(answer: string, events: readonly DeliveredEvent[], dataJson: readonly string[]): HandedOver[] {
  const place = new Map(events.map((event, i) => [event.eventId, i]));
  return (JSON.parse(answer) as HandedOverRow[]).map(([eventId, url, secret, previousSecret, previousUntil]) => {
    const i = place.get(eventId)!;
    const event = events[i]!;
    return {
      event_id: eventId,
      livemode: event.livemode,
      profile_id: event.profileId!,
      type: event.type,
      created: event.created,
      data_json: dataJson[i]!,
      webhook_url: url,
      webhook_secret: secret,
      previous_webhook_secret: previousSecret,
      previous_webhook_secret_until: previousUntil === null ? null : new Date(previousUntil),
    };
  });
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
