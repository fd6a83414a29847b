import type { EntityManager } from "typeorm";
import { PaymentSchema } from "../../gen/paymentservice/v1/payment_pb.js";
import type { App } from "../app.js";
import { preparedQuery } from "../db/prepared.js";
import { lockObject, newObjectStatement, writeObjectChange, type Resource, type Scope } from "../db/resource.js";
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
  isFinal: (row) => terminalStatuses.has(row.status),
};

/** Loads a payment and locks its row for the transaction (confirm vs cancel, two captures, …). */
export function lockPayment(em: EntityManager, scope: Scope, paymentId: string): Promise<PaymentRow> {
  return lockObject(em, paymentResource, scope, paymentId);
}

/**
 * Writes a new payment, the event of the status it starts in and its jobs in one statement, outside
 * any transaction (it is atomic by itself) and prepared, since it is the hot path. The profile and
 * customer checks guard the same statement; when one fails nothing is written and the error names
 * the field.
 */
export async function writeNewPayment(app: App, row: PaymentRow, jobs: NewJob[]): Promise<void> {
  const em = app.dataSource.manager;
  const { sql, params } = newObjectStatement(em, app.clock, paymentResource, row, jobs, (statement) => ownershipGuard(statement, row));
  const [result] = await preparedQuery<{ n: number }>(app.dataSource, sql, params);
  if (result?.n !== 1) throw await ownershipError(em, row);
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
