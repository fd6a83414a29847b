import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { EventSchema } from "../../gen/paymentservice/v1/event_pb.js";
import type { EventRow } from "./event.entity.js";

/** The API view of an event: its object exactly as it was written then, never as it is now. */
export function toEvent(row: EventRow): MessageInitShape<typeof EventSchema> {
  return {
    eventId: row.eventId,
    type: row.type,
    created: timestampFromDate(row.created),
    data: { object: row.data.object as JsonObject },
  };
}
