import type { EntityManager } from "typeorm";
import { DisputeSchema } from "../../gen/paymentservice/v1/dispute_pb.js";
import { findObject, lockObject, type Resource } from "../objects/resource.js";
import type { Scope } from "../db/scope.js";
import { lockPayment } from "../payments/store.js";
import { DisputeRow } from "./dispute.entity.js";
import { disputeStates } from "./states.js";
import { toDispute } from "./view.js";

/** How disputes are stored and reported. */
export const disputeResource: Resource<DisputeRow, typeof DisputeSchema> = {
  name: "dispute",
  label: "Dispute",
  entity: DisputeRow,
  idProperty: "disputeId",
  schema: DisputeSchema,
  view: toDispute,
  states: disputeStates,
  // Opening takes the disputed amount and the dispute fee; winning gives both back, losing nothing.
  movements: (row, previous) => [
    ...(previous === undefined ? [{ type: "dispute" as const, amount: -row.amount }] : []),
    ...(row.status === "won" && previous !== "won" ? [{ type: "dispute_reversal" as const, amount: row.amount }] : []),
  ],
};

/** Loads a dispute and locks its row for the transaction. */
export function lockDispute(em: EntityManager, scope: Scope, disputeId: string): Promise<DisputeRow> {
  return lockObject(em, disputeResource, scope, disputeId);
}

/**
 * Locks a dispute together with its payment, payment first as a new refund does: a dispute that is
 * decided changes what its payment can refund, on the payment's row (migration RefundHolds), so
 * every change that decides one takes the payment first and two such changes never wait on each other.
 */
export async function lockDisputeWithPayment(em: EntityManager, scope: Scope, disputeId: string): Promise<DisputeRow> {
  const found = await findObject(em, disputeResource, scope, disputeId);
  await lockPayment(em, scope, found.paymentId);
  return lockDispute(em, scope, disputeId);
}
