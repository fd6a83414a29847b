import type { EntityManager } from "typeorm";
import { PaymentSchema } from "../../gen/paymentservice/v1/payment_pb.js";
import type { App } from "../app.js";
import { lockRow } from "../db/lock.js";
import { preparedQuery } from "../db/prepared.js";
import { Statement } from "../db/statement.js";
import { notFound } from "../errors.js";
import { addEndOfJobs, addFollowUps } from "../db/follow-ups.js";
import type { EventRow } from "../events/event.entity.js";
import { newEvent } from "../events/record.js";
import type { NewJob } from "../jobs/runner.js";
import { ProfileRow } from "../merchants/profile.entity.js";
import { PaymentRow, type PaymentStatusWord } from "./payment.entity.js";
import { terminalStatuses } from "./rules.js";
import { toPayment } from "./view.js";

/** Which merchant and environment a call acts in. */
export interface Scope {
  readonly merchantId: string;
  readonly livemode: boolean;
}

/**
 * Loads a payment and locks its row until the transaction ends, so the status checks and changes of
 * one operation can never interleave with another's (confirm vs cancel, two captures, …).
 */
export async function lockPayment(em: EntityManager, scope: Scope, paymentId: string): Promise<PaymentRow> {
  const row = await lockRow(em, PaymentRow, { merchantId: scope.merchantId, livemode: scope.livemode, paymentId });
  if (row === null) throw notFound("Payment", paymentId);
  return row;
}

/** The event of the status a payment is in now. */
function paymentEvent(app: App, row: PaymentRow): EventRow {
  return newEvent(
    {
      merchantId: row.merchantId,
      livemode: row.livemode,
      resource: "payment",
      objectId: row.paymentId,
      status: row.status,
      schema: PaymentSchema,
      view: toPayment(row),
    },
    app.clock,
  );
}

/**
 * Writes a new payment, the event of the status it starts in and its jobs in one statement. The
 * profile and customer checks are part of the same statement; when one fails nothing is written and
 * the error names the field.
 */
export async function writeNewPayment(app: App, row: PaymentRow, jobs: NewJob[]): Promise<void> {
  const em = app.dataSource.manager;
  const statement = new Statement();
  const merchant = statement.param(row.merchantId, "varchar");
  const profile = statement.param(row.profileId, "varchar");
  const customer = statement.param(row.customerId, "varchar");
  const livemode = statement.param(row.livemode, "boolean");
  const guard =
    `EXISTS (SELECT 1 FROM profiles WHERE merchant_id = ${merchant} AND profile_id = ${profile}) AND ` +
    `(${customer} IS NULL OR EXISTS (SELECT 1 FROM customers WHERE merchant_id = ${merchant} ` +
    `AND livemode = ${livemode} AND customer_id = ${customer} AND deleted_at IS NULL))`;
  statement.insert("payment", em.connection.getMetadata(PaymentRow), row, { guard });
  addFollowUps(statement, em, app.clock, { event: paymentEvent(app, row), jobs }, "payment");
  const [result] = await preparedQuery<{ n: number }>(app.dataSource, statement.sql("payment"), statement.params);
  if (result?.n === 1) return;
  if (!(await em.existsBy(ProfileRow, { merchantId: row.merchantId, profileId: row.profileId }))) {
    throw notFound("Profile", row.profileId, "profile_id");
  }
  throw notFound("Customer", row.customerId ?? "", "customer_id");
}

/**
 * Writes a change to a locked payment in one statement with everything that must commit with it: the
 * event of the status it entered (if it changed), the jobs the new status needs, and the end of jobs
 * a final status makes pointless.
 */
export async function writePaymentChange(
  em: EntityManager,
  app: App,
  row: PaymentRow,
  previous: PaymentStatusWord,
  jobs: NewJob[] = [],
): Promise<void> {
  const statement = new Statement().update("payment", em.connection.getMetadata(PaymentRow), row);
  if (row.status !== previous) addFollowUps(statement, em, app.clock, { event: paymentEvent(app, row), jobs }, "payment");
  if (terminalStatuses.has(row.status)) addEndOfJobs(statement, { ...row, objectId: row.paymentId }, "payment.");
  await em.query(statement.sql("payment"), statement.params);
}

