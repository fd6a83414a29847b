import type { EntityManager } from "typeorm";
import { MandateSchema } from "../../gen/paymentservice/v1/mandate_pb.js";
import type { Clock } from "../clock.js";
import type { Scope } from "../db/scope.js";
import { lockObject, type Resource } from "../objects/resource.js";
import { runLocked, type LockedOperation } from "../objects/locked-operation.js";
import { MandateRow } from "./mandate.entity.js";
import { mandateStates } from "./states.js";
import { toMandate } from "./view.js";

/** How mandates are stored and reported: their events are mandate.active, mandate.revoked and mandate.inactive. */
export const mandateResource: Resource<MandateRow, typeof MandateSchema> = {
  name: "mandate",
  label: "Mandate",
  entity: MandateRow,
  idProperty: "mandateId",
  schema: MandateSchema,
  view: toMandate,
  states: mandateStates,
};

/** Loads a mandate and locks its row for the transaction. */
export function lockMandate(em: EntityManager, scope: Scope, mandateId: string): Promise<MandateRow> {
  return lockObject(em, mandateResource, scope, mandateId);
}

/**
 * The revocation of one mandate: a revoked mandate allows no payment any more. One that is no longer
 * active is refused (IR_16) when the merchant asked, and left as it is when its payment method goes.
 */
function revocation(clock: Clock, scope: Scope, mandateId: string, notActive: "refuse" | "leave"): LockedOperation<MandateRow> {
  return {
    lock: (em) => lockMandate(em, scope, mandateId),
    decide(row) {
      if (notActive === "leave" && row.status !== "active") return "leave";
      mandateStates.guard("revoke", row.status);
      mandateStates.move(row, "revoke", "revoked");
      row.updated = clock.now();
      return [];
    },
  };
}

/** Revokes one active mandate in `em`'s transaction (IR_16 when it is not active), with its mandate.revoked event. */
export async function revokeMandate(em: EntityManager, clock: Clock, scope: Scope, mandateId: string): Promise<MandateRow> {
  return (await runLocked(em, clock, mandateResource, revocation(clock, scope, mandateId, "refuse")))!;
}

/**
 * Revokes the active mandates of a payment method being deleted (with it, or with its customer), in
 * the transaction that deletes it: no payment can be made under them any more.
 */
export async function revokeMandatesOf(em: EntityManager, clock: Clock, scope: Scope, paymentMethodId: string): Promise<void> {
  const active = (await em.query(
    "SELECT mandate_id FROM mandates WHERE merchant_id = $1 AND livemode = $2 AND payment_method_id = $3 AND status = 'active' ORDER BY mandate_id",
    [scope.merchantId, scope.livemode, paymentMethodId],
  )) as { mandate_id: string }[];
  for (const { mandate_id } of active) await runLocked(em, clock, mandateResource, revocation(clock, scope, mandate_id, "leave"));
}
