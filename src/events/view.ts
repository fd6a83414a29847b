import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { DeliveryStatus, type EventDeliverySchema, type EventSchema } from "../../gen/paymentservice/v1/event_pb.js";
import type { DeliveryRow } from "../webhooks/delivery.entity.js";
import type { EventRow } from "./event.entity.js";

const deliveryStatuses = {
  pending: DeliveryStatus.PENDING,
  delivered: DeliveryStatus.DELIVERED,
  failed: DeliveryStatus.FAILED,
} as const;

/** The delivery state an event shows; an event without a delivery had no webhook_url to go to. */
function toDelivery(row: DeliveryRow | undefined): MessageInitShape<typeof EventDeliverySchema> {
  if (row === undefined) return { status: DeliveryStatus.NO_WEBHOOK_URL, attempts: 0 };
  return {
    status: deliveryStatuses[row.status],
    attempts: row.attempts,
    lastResponseStatus: row.lastResponseStatus ?? undefined,
    lastError: row.lastError ?? undefined,
    lastAttemptAt: row.lastAttemptAt === null ? undefined : timestampFromDate(row.lastAttemptAt),
    nextAttemptAt: row.nextAttemptAt === null ? undefined : timestampFromDate(row.nextAttemptAt),
  };
}

/** The API view of an event: its object exactly as it was written then, never as it is now, and how its delivery stands. */
export function toEvent(row: EventRow, delivery: DeliveryRow | undefined): MessageInitShape<typeof EventSchema> {
  return { ...eventPayloadOf(row), delivery: toDelivery(delivery) };
}

/** An event without its delivery state: what webhooks and streams carry. */
export function eventPayloadOf(row: Pick<EventRow, "eventId" | "type" | "created" | "data">) {
  return {
    eventId: row.eventId,
    type: row.type,
    created: timestampFromDate(row.created),
    data: { object: row.data.object as JsonObject },
  };
}
