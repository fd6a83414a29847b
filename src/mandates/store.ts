import type { EntityManager } from "typeorm";
import { MandateSchema } from "../../gen/paymentservice/v1/mandate_pb.js";
import type { Clock } from "../clock.js";
import type { Scope } from "../db/scope.js";
import { lockObject, type Resource } from "../objects/resource.js";
import { runLocked } from "../objects/locked-operation.js";
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

/** Revokes one active mandate in `em`'s transaction (IR_16 when it is not active), with its mandate.revoked event. */
export function revokeMandate(em: EntityManager, clock: Clock, scope: Scope, mandateId: string): Promise<MandateRow> {
  return runLocked(em, clock, mandateResource, {
    lock: (locked) => lockMandate(locked, scope, mandateId),
    decide(row) {
      mandateStates.guard("revoke", row.status);
      mandateStates.move(row, "revoke", "revoked");
      row.updated = clock.now();
      return [];
    },
  });
}

/**
 * Revokes the active mandates of a payment method or a customer being deleted, in the transaction
 * that deletes it: no payment can be made under them any more.
 */
export async function revokeMandatesOf(
  em: EntityManager,
  clock: Clock,
  scope: Scope,
  of: { readonly paymentMethodId: string } | { readonly customerId: string },
): Promise<void> {
  const column = "paymentMethodId" in of ? "payment_method_id" : "customer_id";
  const active = (await em.query(
    `SELECT mandate_id FROM mandates WHERE merchant_id = $1 AND livemode = $2 AND ${column} = $3 AND status = 'active' ORDER BY mandate_id`,
    [scope.merchantId, scope.livemode, "paymentMethodId" in of ? of.paymentMethodId : of.customerId],
  )) as { mandate_id: string }[];
  for (const { mandate_id } of active) {
    await runLocked(em, clock, mandateResource, {
      lock: (locked) => lockMandate(locked, scope, mandate_id),
      decide(row) {
        if (row.status !== "active") return "leave";
        mandateStates.move(row, "revoke", "revoked");
        row.updated = clock.now();
        return [];
      },
    });
  }
}
