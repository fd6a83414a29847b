import type { ServiceImpl } from "@connectrpc/connect";
import type { DataSource } from "typeorm";
import type { EventService } from "../../gen/paymentservice/v1/event_pb.js";
import { merchantOf } from "../auth/caller.js";
import { fetchPage, scopedQuery } from "../db/list-query.js";
import { notFound } from "../errors.js";
import { envelope, pageOf } from "../validation/list.js";
import { EventRow } from "./event.entity.js";
import { toEvent } from "./view.js";

/** What the events API needs: the database. */
export interface EventDependencies {
  readonly dataSource: DataSource;
}

/**
 * Events (decisions §8, docs/events.md): read the status changes the service records, scoped to the
 * caller's merchant and environment like every object. Redelivery waits for webhook delivery, so it
 * is left out and answers `unimplemented` (IR_00).
 */
export function eventService(deps: EventDependencies): Partial<ServiceImpl<typeof EventService>> {
  const { dataSource } = deps;

  return {
    async retrieveEvent(req, ctx) {
      const caller = merchantOf(ctx);
      const row = await dataSource.manager.findOneBy(EventRow, {
        merchantId: caller.merchantId,
        livemode: caller.livemode,
        eventId: req.eventId,
      });
      if (row === null) throw notFound("Event", req.eventId);
      return toEvent(row);
    },

    async listEvents(req, ctx) {
      const caller = merchantOf(ctx);
      const page = pageOf(req);
      const query = scopedQuery(dataSource, EventRow, "e", caller);
      if (req.type !== undefined) query.andWhere("e.type = :type", { type: req.type });
      if (req.objectId !== undefined) query.andWhere("e.object_id = :objectId", { objectId: req.objectId });
      // seq orders every event, those written in one instant too, in the order they were written.
      const [rows, total] = await fetchPage(query, ["seq"], page);
      return envelope(rows.map(toEvent), total, page);
    },
  };
}
