import type { EntityManager } from "typeorm";
import { RefundSchema } from "../../gen/paymentservice/v1/refund_pb.js";
import type { App } from "../app.js";
import { addEndOfJobs, addFollowUps } from "../db/follow-ups.js";
import { lockRow } from "../db/lock.js";
import { Statement } from "../db/statement.js";
import { notFound } from "../errors.js";
import type { EventRow } from "../events/event.entity.js";
import { newEvent } from "../events/record.js";
import type { NewJob } from "../jobs/runner.js";
import type { Scope } from "../payments/store.js";
import { RefundRow, type RefundStatusWord } from "./refund.entity.js";
import { toRefund } from "./view.js";

/** Job kind that sends a pending refund to the processor. */
export const processRefundJob = "refund.process";

/** Loads a refund and locks its row for the transaction (cancel vs processing, two cancels, …). */
export async function lockRefund(em: EntityManager, scope: Scope, refundId: string): Promise<RefundRow> {
  const row = await lockRow(em, RefundRow, { merchantId: scope.merchantId, livemode: scope.livemode, refundId });
  if (row === null) throw notFound("Refund", refundId);
  return row;
}

function refundEvent(app: App, row: RefundRow): EventRow {
  return newEvent(
    {
      merchantId: row.merchantId,
      livemode: row.livemode,
      resource: "refund",
      objectId: row.refundId,
      status: row.status,
      schema: RefundSchema,
      view: toRefund(row),
    },
    app.clock,
  );
}

/** Writes a new refund, its refund.pending event and its processing job in one statement. */
export async function writeNewRefund(em: EntityManager, app: App, row: RefundRow, jobs: NewJob[]): Promise<void> {
  const statement = new Statement().insert("refund", em.connection.getMetadata(RefundRow), row);
  addFollowUps(statement, em, app.clock, { event: refundEvent(app, row), jobs }, "refund");
  await em.query(statement.sql("refund"), statement.params);
}

/** Writes a change to a locked refund, with the event of a new status and the end of its jobs once final. */
export async function writeRefundChange(em: EntityManager, app: App, row: RefundRow, previous: RefundStatusWord): Promise<void> {
  const statement = new Statement().update("refund", em.connection.getMetadata(RefundRow), row);
  if (row.status !== previous) addFollowUps(statement, em, app.clock, { event: refundEvent(app, row), jobs: [] }, "refund");
  if (row.status !== "pending") addEndOfJobs(statement, { ...row, objectId: row.refundId }, "refund.");
  await em.query(statement.sql("refund"), statement.params);
}
