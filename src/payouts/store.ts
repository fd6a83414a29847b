import type { EntityManager } from "typeorm";
import { PayoutSchema } from "../../gen/paymentservice/v1/payout_pb.js";
import type { App } from "../app.js";
import { lockObject, writeObjectChange, type Resource, type Scope } from "../db/resource.js";
import type { NewJob } from "../jobs/runner.js";
import { ownershipError, ownershipGuard } from "../merchants/ownership.js";
import { PayoutRow, type PayoutStatusWord } from "./payout.entity.js";
import { toPayout } from "./view.js";

/** Job kind that sends a pending payout through its processors. */
export const sendPayoutJob = "payout.send";

/** Statuses a payout never leaves. */
export const finalStatuses: ReadonlySet<PayoutStatusWord> = new Set(["success", "failed", "cancelled"]);

/** How payouts are stored and reported. */
export const payoutResource: Resource<PayoutRow, typeof PayoutSchema> = {
  name: "payout",
  label: "Payout",
  entity: PayoutRow,
  idProperty: "payoutId",
  schema: PayoutSchema,
  view: toPayout,
  guard: ownershipGuard,
  isFinal: (row) => finalStatuses.has(row.status),
};

/** The job that sends a payout now. */
export function sendJobOf(row: PayoutRow, now: Date): NewJob {
  return { kind: sendPayoutJob, merchantId: row.merchantId, livemode: row.livemode, objectId: row.payoutId, runAt: now };
}

/** Loads a payout and locks its row for the transaction (fulfill vs cancel, sending vs cancel, …). */
export function lockPayout(em: EntityManager, scope: Scope, payoutId: string): Promise<PayoutRow> {
  return lockObject(em, payoutResource, scope, payoutId);
}

/**
 * Writes a new payout with its first event and its jobs, guarded by the profile and customer checks;
 * when one fails nothing is written and the error names the field.
 */
export async function writeNewPayout(app: App, row: PayoutRow, jobs: NewJob[]): Promise<void> {
  if (!(await app.newObjects.write(payoutResource, row, jobs))) throw await ownershipError(app.dataSource.manager, row);
}

/**
 * Writes a change to a locked payout with the event of a new status; a final payout also drops its
 * encrypted destination, since it will never be sent again, and its pending jobs.
 */
export function writePayoutChange(em: EntityManager, app: App, row: PayoutRow, previous: PayoutStatusWord, jobs: NewJob[] = []): Promise<void> {
  if (finalStatuses.has(row.status)) row.destinationCiphertext = null;
  return writeObjectChange(em, app.clock, payoutResource, row, previous, jobs);
}
