import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { type DataSource, type EntityManager, In } from "typeorm";
import type { EventService } from "../../gen/paymentservice/v1/event_pb.js";
import { merchantOf } from "../auth/caller.js";
import type { Clock } from "../clock.js";
import { fetchPage, scopedQuery } from "../db/list-query.js";
import type { UnitOfWork } from "../db/unit-of-work.js";
import { deadlineExceeded, notFound, preconditionFailed } from "../errors.js";
import { ProfileRow } from "../merchants/profile.entity.js";
import { sendStreamHead } from "../stream-head.js";
import { envelope, pageOf } from "../validation/list.js";
import { DeliveryRow } from "../webhooks/delivery.entity.js";
import { redeliver } from "../webhooks/schedule.js";
import { EventRow } from "./event.entity.js";
import type { EventFeed } from "./feed.js";
import { eventPayloadOf, toEvent } from "./view.js";

/** What the events API needs: the database, time, the unit of work a redelivery commits in, and word of new events for streams. */
export interface EventDependencies {
  readonly dataSource: DataSource;
  readonly clock: Clock;
  readonly units: UnitOfWork;
  readonly eventFeed: EventFeed;
}

/** A stream's place in the order of events: the writing transaction, then seq within it. */
interface Cursor {
  readonly txid: string;
  readonly seq: string;
}

/** Events a stream reads at once. */
const streamBatch = 500;

/**
 * The caller's events after the cursor, in order, written by transactions that have all ended: every
 * transaction older than the oldest one still running has committed or rolled back, so no event can
 * later appear before the last one read, however the commits of concurrent writers interleave.
 */
const eventsAfter = `
SELECT event_id, type, created, data, txid::text AS txid, seq::text AS seq FROM events
 WHERE merchant_id = $1 AND livemode = $2 AND (txid, seq) > ($3::xid8, $4::bigint)
   AND txid < pg_snapshot_xmin(pg_current_snapshot())
 ORDER BY events.txid, events.seq LIMIT ${streamBatch}`;

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
  const { dataSource, clock, units, eventFeed } = deps;

  /** Where a stream starts: right after the consumer's last event, or after every transaction that has ended by now. */
  async function startOf(scope: { merchantId: string; livemode: boolean }, afterEventId: string | undefined): Promise<Cursor> {
    if (afterEventId === undefined) {
      const [now] = (await dataSource.query(`SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS txid`)) as { txid: string }[];
      return { txid: now!.txid, seq: "-1" };
    }
    const [last] = (await dataSource.query(
      `SELECT txid::text AS txid, seq::text AS seq FROM events WHERE merchant_id = $1 AND livemode = $2 AND event_id = $3`,
      [scope.merchantId, scope.livemode, afterEventId],
    )) as Cursor[];
    if (last === undefined) throw notFound("Event", afterEventId, "after_event_id");
    return last;
  }

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
      const kept = req.objectId === undefined ? { list: "events" as const, scope: caller, key: req.type } : undefined;
      // The writing transaction, then seq, orders every event (those written in one instant too) as a stream reads them.
      const [rows, total] = await fetchPage(query, ["txid", "seq"], page, kept);
      const deliveries = await deliveriesOf(dataSource.manager, rows);
      return envelope(
        rows.map((row) => toEvent(row, deliveries.get(row.eventId))),
        total,
        page,
      );
    },

    async *streamEvents(req, ctx) {
      const caller = merchantOf(ctx);
      let cursor = await startOf(caller, req.afterEventId);
      // The stream is live from here: an event committed after the client has its headers is sent.
      sendStreamHead(ctx);
      while (!ctx.signal.aborted) {
        const rows = (await dataSource.query(eventsAfter, [caller.merchantId, caller.livemode, cursor.txid, cursor.seq])) as (Pick<
          EventRow,
          "type" | "created" | "data"
        > &
          Cursor & { event_id: string })[];
        for (const row of rows) {
          yield eventPayloadOf({ eventId: row.event_id, type: row.type, created: row.created, data: row.data });
          cursor = row;
        }
        if (rows.length < streamBatch) await eventFeed.next(ctx.signal);
      }
      // A consumer that went away needs no answer; one whose own deadline passed is told so.
      if (ctx.signal.reason instanceof ConnectError && ctx.signal.reason.code === Code.DeadlineExceeded) throw deadlineExceeded();
    },

    /**
     * Makes the event's delivery due now with a fresh 3-day window, whatever became of it before (an
     * event whose profile had no webhook_url then gets its first delivery). A delivery an instance
     * holds stays its own until the lease ends, so one attempt at a time ever goes out: an attempt in
     * flight stands for the redelivery, and one held by an instance that died goes out when its lease
     * runs out (at most 70 s).
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
        await redeliver(em, { ...row, profileId: row.profileId }, clock.now());
        return toEvent(row, (await deliveriesOf(em, [row])).get(row.eventId));
      });
    },
  };
}
