import type { ServiceImpl } from "@connectrpc/connect";
import { type DataSource, type EntityManager, In } from "typeorm";
import type { EventService } from "../../gen/paymentservice/v1/event_pb.js";
import { merchantOf } from "../auth/caller.js";
import type { Clock } from "../clock.js";
import { fetchPage, scopedQuery } from "../db/list-query.js";
import type { UnitOfWork } from "../db/unit-of-work.js";
import { notFound, preconditionFailed } from "../errors.js";
import { ProfileRow } from "../merchants/profile.entity.js";
import { envelope, pageOf } from "../validation/list.js";
import { DeliveryRow } from "../webhooks/delivery.entity.js";
import { retryWindowMs } from "../webhooks/schedule.js";
import { EventRow } from "./event.entity.js";
import { toEvent } from "./view.js";

/** What the events API needs: the database, time and the unit of work a redelivery commits in. */
export interface EventDependencies {
  readonly dataSource: DataSource;
  readonly clock: Clock;
  readonly units: UnitOfWork;
}

/** The deliveries of `events`, by event id. */
async function deliveriesOf(em: EntityManager, events: readonly EventRow[]): Promise<Map<string, DeliveryRow>> {
  if (events.length === 0) return new Map();
  const rows = await em.findBy(DeliveryRow, { eventId: In(events.map((e) => e.eventId)) });
  return new Map(rows.map((row) => [row.eventId, row]));
}

/**
 * Events (decisions §8, docs/events.md): read the status changes the service records with how their
 * webhook delivery stands, scoped to the caller's merchant and environment like every object, and
 * send one again.
 */
export function eventService(deps: EventDependencies): ServiceImpl<typeof EventService> {
  const { dataSource, clock, units } = deps;

  async function findEvent(em: EntityManager, scope: { merchantId: string; livemode: boolean }, eventId: string): Promise<EventRow> {
    const row = await em.findOneBy(EventRow, { merchantId: scope.merchantId, livemode: scope.livemode, eventId });
    if (row === null) throw notFound("Event", eventId);
    return row;
  }

  return {
    async retrieveEvent(req, ctx) {
      const row = await findEvent(dataSource.manager, merchantOf(ctx), req.eventId);
      return toEvent(row, (await deliveriesOf(dataSource.manager, [row])).get(row.eventId));
    },

    async listEvents(req, ctx) {
      const caller = merchantOf(ctx);
      const page = pageOf(req);
      const query = scopedQuery(dataSource, EventRow, "e", caller);
      if (req.type !== undefined) query.andWhere("e.type = :type", { type: req.type });
      if (req.objectId !== undefined) query.andWhere("e.object_id = :objectId", { objectId: req.objectId });
      // seq orders every event, those written in one instant too, in the order they were written.
      const [rows, total] = await fetchPage(query, ["seq"], page);
      const deliveries = await deliveriesOf(dataSource.manager, rows);
      return envelope(
        rows.map((row) => toEvent(row, deliveries.get(row.eventId))),
        total,
        page,
      );
    },

    /**
     * Makes the event's delivery due now with a fresh 3-day window, whatever became of it before (an
     * event whose profile had no webhook_url then gets its first delivery). An attempt already in
     * flight still finishes, and its outcome stands for this request.
     */
    async redeliverEvent(req, ctx) {
      const caller = merchantOf(ctx);
      return units.commit(ctx, async (em) => {
        const row = await findEvent(em, caller, req.eventId);
        if (row.profileId === null)
          throw preconditionFailed(`Event ${row.eventId} was recorded before webhooks were sent and has no profile`);
        const profile = await em.findOneBy(ProfileRow, { profileId: row.profileId });
        if (profile?.webhookUrl == null)
          throw preconditionFailed(`Profile ${row.profileId} has no webhook_url to deliver event ${row.eventId} to`);
        const now = clock.now();
        await em.query(
          `INSERT INTO webhook_deliveries (event_id, merchant_id, livemode, profile_id, status, attempts, next_attempt_at, deliver_until, created)
           VALUES ($1, $2, $3, $4, 'pending', 0, $5, $6, $5)
           ON CONFLICT (event_id) DO UPDATE SET status = 'pending', next_attempt_at = $5, deliver_until = $6`,
          [row.eventId, row.merchantId, row.livemode, row.profileId, now, new Date(now.getTime() + retryWindowMs)],
        );
        return toEvent(row, (await deliveriesOf(em, [row])).get(row.eventId));
      });
    },
  };
}
