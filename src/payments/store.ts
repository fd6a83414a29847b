import type { EntityManager } from "typeorm";
import { PaymentSchema } from "../../gen/paymentservice/v1/payment_pb.js";
import type { App } from "../app.js";
import { lockObject, writeObjectChange, type Resource, type Scope } from "../db/resource.js";
import type { NewJob } from "../jobs/runner.js";
import { ownershipError, ownershipGuard } from "../merchants/ownership.js";
import { PaymentRow, type PaymentStatusWord } from "./payment.entity.js";
import { terminalStatuses } from "./rules.js";
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
  isFinal: (row) => terminalStatuses.has(row.status),
};

/** Loads a payment and locks its row for the transaction (confirm vs cancel, two captures, …). */
export function lockPayment(em: EntityManager, scope: Scope, paymentId: string): Promise<PaymentRow> {
  return lockObject(em, paymentResource, scope, paymentId);
}

/**
 * Writes a new payment with its first event and its jobs, guarded by the profile and customer checks;
 * when one fails nothing is written and the error names the field.
 */
export async function writeNewPayment(app: App, row: PaymentRow, jobs: NewJob[]): Promise<void> {
  if (!(await app.newObjects.write(paymentResource, row, jobs))) throw await ownershipError(app.dataSource.manager, row);
}

/** Writes a change to a locked payment with its event, its jobs and, once final, the end of its jobs. */
export function writePaymentChange(
  em: EntityManager,
  app: App,
  row: PaymentRow,
  previous: PaymentStatusWord,
  jobs: NewJob[] = [],
): Promise<void> {
  return writeObjectChange(em, app.clock, paymentResource, row, previous, jobs);
}
