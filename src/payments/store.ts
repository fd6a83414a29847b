import type { EntityManager } from "typeorm";
import { PaymentSchema } from "../../gen/paymentservice/v1/payment_pb.js";
import { lockObject, type Resource } from "../objects/resource.js";
import type { Scope } from "../db/scope.js";
import { ownershipError, ownershipGuard } from "../merchants/ownership.js";
import { PaymentRow } from "./payment.entity.js";
import { paymentStates } from "./states.js";
import { toPayment } from "./view.js";

/** How payments are stored and reported. */
export const paymentResource: Resource<PaymentRow, typeof PaymentSchema> = {
  name: "payment",
  label: "Payment",
  entity: PaymentRow,
  idProperty: "paymentId",
  schema: PaymentSchema,
  view: toPayment,
  guard: ownershipGuard,
  refusal: ownershipError,
  states: paymentStates,
  // Captured: what was received is credited, pending until the profile's settlement delay.
  movements: (row, previous) =>
    row.status === "succeeded" && previous !== "succeeded" && row.amountReceived !== null && row.amountReceived > 0n
      ? [{ type: "payment", amount: row.amountReceived }]
      : [],
};

/** Loads a payment and locks its row for the transaction (confirm vs cancel, two captures, …). */
export function lockPayment(em: EntityManager, scope: Scope, paymentId: string): Promise<PaymentRow> {
  return lockObject(em, paymentResource, scope, paymentId);
}
