import { In, type EntityManager } from "typeorm";
import { PaymentSchema } from "../../gen/paymentservice/v1/payment_pb.js";
import type { App } from "../app.js";
import { notFound } from "../errors.js";
import { recordEvent } from "../events/record.js";
import { JobRow } from "../jobs/job.entity.js";
import { enqueueJob, type NewJob } from "../jobs/runner.js";
import { paymentJobs } from "./authorization.js";
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
  const row = await em.findOne(PaymentRow, {
    where: { merchantId: scope.merchantId, livemode: scope.livemode, paymentId },
    lock: { mode: "pessimistic_write" },
  });
  if (row === null) throw notFound("Payment", paymentId);
  return row;
}

/**
 * Writes a payment change with everything that must commit with it: the event of the status it
 * entered (if it changed), the jobs the new status needs, and the end of jobs a final status makes
 * pointless. `previous` is undefined for a new payment.
 */
export async function savePayment(
  em: EntityManager,
  app: App,
  row: PaymentRow,
  previous: PaymentStatusWord | undefined,
  jobs: NewJob[] = [],
): Promise<void> {
  if (previous === undefined) {
    await em.insert(PaymentRow, row);
  } else {
    const { merchantId, livemode, paymentId, ...changes } = row;
    await em.update(PaymentRow, { merchantId, livemode, paymentId }, changes);
  }
  if (row.status !== previous) {
    await recordEvent(
      em,
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
  if (previous !== undefined && terminalStatuses.has(row.status)) {
    await em.delete(JobRow, {
      merchantId: row.merchantId,
      livemode: row.livemode,
      objectId: row.paymentId,
      kind: In(Object.values(paymentJobs)),
    });
  }
  for (const job of jobs) await enqueueJob(em, job, app.clock);
}
