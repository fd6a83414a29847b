import type { EntityManager } from "typeorm";
import { PaymentSchema } from "../../gen/paymentservice/v1/payment_pb.js";
import type { Clock } from "../clock.js";
import { lockObject, type Resource } from "../objects/resource.js";
import { writeLockedChange } from "../objects/writer.js";
import type { Scope } from "../db/scope.js";
import type { NewJob } from "../jobs/runner.js";
import { ownershipError, ownershipGuard } from "../merchants/ownership.js";
import { PaymentRow, type PaymentStatusWord } from "./payment.entity.js";
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
};

/** Loads a payment and locks its row for the transaction (confirm vs cancel, two captures, …). */
export function lockPayment(em: EntityManager, scope: Scope, paymentId: string): Promise<PaymentRow> {
  return lockObject(em, paymentResource, scope, paymentId);
}

/** Writes a change to a locked payment with its event, its jobs and, once final, the end of its jobs. */
export function writePaymentChange(
  em: EntityManager,
  clock: Clock,
  row: PaymentRow,
  previous: PaymentStatusWord,
  jobs: NewJob[] = [],
): Promise<void> {
  return writeLockedChange(em, clock, paymentResource, row, previous, jobs);
}
