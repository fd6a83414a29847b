import type { EntityManager } from "typeorm";
import { PayoutSchema } from "../../gen/paymentservice/v1/payout_pb.js";
import { jobKinds } from "../jobs/kinds.js";
import { lockObject, type Resource } from "../objects/resource.js";
import type { Scope } from "../db/scope.js";
import { jobFor, type NewJob } from "../jobs/runner.js";
import { ownershipError, ownershipGuard } from "../merchants/ownership.js";
import { PayoutRow, type PayoutStatusWord } from "./payout.entity.js";
import { payoutStates } from "./states.js";
import { toPayout } from "./view.js";

/** The statuses of a payout whose money came back: it was never sent, or sending it failed. */
const reversedStatuses: ReadonlySet<PayoutStatusWord> = new Set(["failed", "cancelled"]);

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
  // Created: its amount leaves the balance at once; failing or cancelled gives it back.
  movements: (row, previous) => [
    ...(previous === undefined ? [{ type: "payout" as const, amount: -row.amount }] : []),
    ...(reversedStatuses.has(row.status) && (previous === undefined || !reversedStatuses.has(previous))
      ? [{ type: "payout_reversal" as const, amount: row.amount }]
      : []),
  ],
  onFinal(row) {
    row.destinationCiphertext = null;
  },
};

/** The job that sends a payout now. */
export function sendJobOf(row: PayoutRow, now: Date): NewJob {
  return jobFor(jobKinds.sendPayout, row, row.payoutId, now);
}

/** Loads a payout and locks its row for the transaction (fulfill vs cancel, sending vs cancel, …). */
export function lockPayout(em: EntityManager, scope: Scope, payoutId: string): Promise<PayoutRow> {
  return lockObject(em, payoutResource, scope, payoutId);
}
