import type { EntityManager } from "typeorm";
import { RefundSchema } from "../../gen/paymentservice/v1/refund_pb.js";
import type { App } from "../app.js";
import { writeNewObject } from "../db/new-objects.js";
import { lockObject, writeObjectChange, type Resource } from "../db/resource.js";
import type { NewJob } from "../jobs/runner.js";
import type { Scope } from "../db/resource.js";
import { RefundRow, type RefundStatusWord } from "./refund.entity.js";
import { toRefund } from "./view.js";

/** Job kind that sends a pending refund to the processor. */
export const processRefundJob = "refund.process";

/** How refunds are stored and reported. */
export const refundResource: Resource<RefundRow, typeof RefundSchema> = {
  name: "refund",
  label: "Refund",
  entity: RefundRow,
  idProperty: "refundId",
  schema: RefundSchema,
  view: toRefund,
  isFinal: (row) => row.status !== "pending",
};

/** Loads a refund and locks its row for the transaction (cancel vs processing, two cancels, …). */
export function lockRefund(em: EntityManager, scope: Scope, refundId: string): Promise<RefundRow> {
  return lockObject(em, refundResource, scope, refundId);
}

/** Writes a new refund, its refund.pending event and its processing job in one statement. */
export async function writeNewRefund(em: EntityManager, app: App, row: RefundRow, jobs: NewJob[]): Promise<void> {
  await writeNewObject(em, app.clock, refundResource, row, jobs);
}

/** Writes a change to a locked refund, with the event of a new status and the end of its jobs once final. */
export function writeRefundChange(em: EntityManager, app: App, row: RefundRow, previous: RefundStatusWord): Promise<void> {
  return writeObjectChange(em, app.clock, refundResource, row, previous);
}
