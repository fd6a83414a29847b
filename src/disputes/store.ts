import type { EntityManager } from "typeorm";
import { DisputeSchema } from "../../gen/paymentservice/v1/dispute_pb.js";
import type { App } from "../app.js";
import { writeNewObject } from "../db/new-objects.js";
import { lockObject, writeObjectChange, type Resource } from "../db/resource.js";
import type { NewJob } from "../jobs/runner.js";
import type { Scope } from "../db/resource.js";
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

/** How disputes are stored and reported. */
export const disputeResource: Resource<DisputeRow, typeof DisputeSchema> = {
  name: "dispute",
  label: "Dispute",
  entity: DisputeRow,
  idProperty: "disputeId",
  schema: DisputeSchema,
  view: toDispute,
  isFinal: (row) => !openStatuses.includes(row.status),
};

/** Loads a dispute and locks its row for the transaction. */
export function lockDispute(em: EntityManager, scope: Scope, disputeId: string): Promise<DisputeRow> {
  return lockObject(em, disputeResource, scope, disputeId);
}

/** Writes a new dispute with its dispute.opened event and its expiry job. */
export async function writeNewDispute(em: EntityManager, app: App, row: DisputeRow, jobs: NewJob[]): Promise<void> {
  await writeNewObject(em, app.clock, disputeResource, row, jobs);
}

/** Writes a change to a locked dispute with the event of its new status; a decided dispute ends its jobs. */
export function writeDisputeChange(em: EntityManager, app: App, row: DisputeRow, previous: DisputeStatusWord): Promise<void> {
  return writeObjectChange(em, app.clock, disputeResource, row, previous);
}
