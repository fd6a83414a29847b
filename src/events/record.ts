import { create, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import type { EntityManager } from "typeorm";
import type { Clock } from "../clock.js";
import { newId } from "../ids.js";
import { writeMessage } from "../rest-json/codec.js";
import { deliveriesSql, eventsReturning } from "../webhooks/schedule.js";
import { EventRow } from "./event.entity.js";

/** The object an event is about: who owns it, what it is and how its API view looks now. */
export interface EventSubject<Desc extends DescMessage> {
  readonly merchantId: string;
  readonly livemode: boolean;
  /** Resource name used in the event type, e.g. "payment". */
  readonly resource: string;
  readonly objectId: string;
  readonly profileId: string;
  readonly status: string;
  readonly schema: Desc;
  readonly view: MessageInitShape<Desc>;
}

/**
 * The `<resource>.<status>` event of a status change. The snapshot is the REST shape that retrieve
 * returns, which is what webhook receivers get.
 */
export function newEvent<Desc extends DescMessage>(subject: EventSubject<Desc>, clock: Clock): EventRow {
  return Object.assign(new EventRow(), {
    eventId: newId("evt"),
    merchantId: subject.merchantId,
    livemode: subject.livemode,
    type: `${subject.resource}.${subject.status}`,
    objectId: subject.objectId,
    profileId: subject.profileId,
    data: { object: writeMessage(create(subject.schema, subject.view), subject.schema) },
    created: clock.now(),
  });
}

/**
 * Writes the event of a change to an object without a status (a payment method's attachment) in the
 * transaction `em` of that change, with its webhook delivery. Objects with a status get theirs from
 * the statement that writes them (objects/change.ts).
 */
export async function writeEvent(em: EntityManager, event: EventRow): Promise<void> {
  await em.query(
    `WITH e AS (INSERT INTO events (event_id, merchant_id, livemode, type, object_id, profile_id, data, created)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${eventsReturning})
     ${deliveriesSql("e")}`,
    [
      event.eventId,
      event.merchantId,
      event.livemode,
      event.type,
      event.objectId,
      event.profileId,
      JSON.stringify(event.data),
      event.created,
    ],
  );
}
