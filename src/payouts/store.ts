import type { EntityManager } from "typeorm";
import { PayoutSchema } from "../../gen/paymentservice/v1/payout_pb.js";
import type { Clock } from "../clock.js";
import { jobKinds } from "../jobs/kinds.js";
import { lockObject, type Resource } from "../objects/resource.js";
import { writeLockedChange } from "../objects/writer.js";
import type { Scope } from "../db/scope.js";
import { jobFor, type NewJob } from "../jobs/runner.js";
import { ownershipError, ownershipGuard } from "../merchants/ownership.js";
import { PayoutRow, type PayoutStatusWord } from "./payout.entity.js";
import { payoutStates } from "./states.js";
import { toPayout } from "./view.js";

/** How payouts are stored and reported. */
export const payoutResource: Resource<PayoutRow, typeof PayoutSchema> = {
  name: "payout",
  label: "Payout",
  entity: PayoutRow,
  idProperty: "payoutId",
  schema: PayoutSchema,
  view: toPayout,
  guard: ownershipGuard,
  refusal: ownershipError,
  states: payoutStates,
};

/** The job that sends a payout now. */
export function sendJobOf(row: PayoutRow, now: Date): NewJob {
  return jobFor(jobKinds.sendPayout, row, row.payoutId, now);
}

/** Loads a payout and locks its row for the transaction (fulfill vs cancel, sending vs cancel, …). */
export function lockPayout(em: EntityManager, scope: Scope, payoutId: string): Promise<PayoutRow> {
  return lockObject(em, payoutResource, scope, payoutId);
}

/**
 * Writes a change to a locked payout with the event of a new status; a final payout also drops its
 * encrypted destination, since it will never be sent again, and its pending jobs.
 */
export function writePayoutChange(
  em: EntityManager,
  clock: Clock,
  row: PayoutRow,
  previous: PayoutStatusWord,
  jobs: NewJob[] = [],
): Promise<void> {
  if (payoutStates.isFinal(row.status)) row.destinationCiphertext = null;
  return writeLockedChange(em, clock, payoutResource, row, previous, jobs);
}
