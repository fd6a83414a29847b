import type { EntityManager } from "typeorm";
import { RefundSchema } from "../../gen/paymentservice/v1/refund_pb.js";
import type { Clock } from "../clock.js";
import { writeNewObject } from "../db/new-objects.js";
import { writeObjectChange, type Resource } from "../db/resource.js";
import type { NewJob } from "../jobs/runner.js";
import { RefundRow, type RefundStatusWord } from "./refund.entity.js";
import { refundStates } from "./states.js";
import { toRefund } from "./view.js";

/** How refunds are stored and reported. */
export const refundResource: Resource<RefundRow, typeof RefundSchema> = {
  name: "refund",
  label: "Refund",
  entity: RefundRow,
  idProperty: "refundId",
  schema: RefundSchema,
  view: toRefund,
  states: refundStates,
};

/** Writes a new refund, its refund.pending event and its processing job in one statement. */
export async function writeNewRefund(em: EntityManager, clock: Clock, row: RefundRow, jobs: NewJob[]): Promise<void> {
  await writeNewObject(em, clock, refundResource, row, jobs);
}

/** Writes a change to a locked refund, with the event of a new status and the end of its jobs once final. */
export function writeRefundChange(em: EntityManager, clock: Clock, row: RefundRow, previous: RefundStatusWord): Promise<void> {
  return writeObjectChange(em, clock, refundResource, row, previous);
}
