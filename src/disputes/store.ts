import type { EntityManager } from "typeorm";
import { DisputeSchema } from "../../gen/paymentservice/v1/dispute_pb.js";
import type { App } from "../app.js";
import { addEndOfJobs, addFollowUps } from "../db/follow-ups.js";
import { lockRow } from "../db/lock.js";
import { Statement } from "../db/statement.js";
import { notFound } from "../errors.js";
import type { EventRow } from "../events/event.entity.js";
import { newEvent } from "../events/record.js";
import type { NewJob } from "../jobs/runner.js";
import type { Scope } from "../payments/store.js";
import { DisputeRow, type DisputeStatusWord } from "./dispute.entity.js";
import { toDispute } from "./view.js";

/** Job kinds of disputes. */
export const disputeJobs = {
  /** The sandbox network reports the dispute of a payment made with card 4000000000000259. */
  openReported: "dispute.open_reported",
  /** An opened dispute without evidence by evidence_due_by expires (counts as lost). */
  expire: "dispute.expire",
} as const;

/** Statuses in which the disputed money is gone for good: it cannot be refunded as well. */
export const lostStatuses: readonly DisputeStatusWord[] = ["accepted", "lost", "expired"];

/** Statuses in which the dispute is still undecided. */
export const openStatuses: readonly DisputeStatusWord[] = ["opened", "challenged"];

/** Loads a dispute and locks its row for the transaction. */
export async function lockDispute(em: EntityManager, scope: Scope, disputeId: string): Promise<DisputeRow> {
  const row = await lockRow(em, DisputeRow, { merchantId: scope.merchantId, livemode: scope.livemode, disputeId });
  if (row === null) throw notFound("Dispute", disputeId);
  return row;
}

function disputeEvent(app: App, row: DisputeRow): EventRow {
  return newEvent(
    {
      merchantId: row.merchantId,
      livemode: row.livemode,
      resource: "dispute",
      objectId: row.disputeId,
      status: row.status,
      schema: DisputeSchema,
      view: toDispute(row),
    },
    app.clock,
  );
}

/** Writes a new dispute with its dispute.opened event and its expiry job. */
export async function writeNewDispute(em: EntityManager, app: App, row: DisputeRow, jobs: NewJob[]): Promise<void> {
  const statement = new Statement().insert("dispute", em.connection.getMetadata(DisputeRow), row);
  addFollowUps(statement, em, app.clock, { event: disputeEvent(app, row), jobs }, "dispute");
  await em.query(statement.sql("dispute"), statement.params);
}

/** Writes a change to a locked dispute with the event of its new status; a decided dispute ends its jobs. */
export async function writeDisputeChange(em: EntityManager, app: App, row: DisputeRow, previous: DisputeStatusWord): Promise<void> {
  const statement = new Statement().update("dispute", em.connection.getMetadata(DisputeRow), row);
  if (row.status !== previous) addFollowUps(statement, em, app.clock, { event: disputeEvent(app, row), jobs: [] }, "dispute");
  if (!openStatuses.includes(row.status)) addEndOfJobs(statement, { ...row, objectId: row.disputeId }, "dispute.");
  await em.query(statement.sql("dispute"), statement.params);
}
