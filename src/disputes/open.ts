import type { EntityManager } from "typeorm";
import type { App } from "../app.js";
import { ApiError } from "../errors.js";
import { newId } from "../ids.js";
import type { PaymentRow } from "../payments/payment.entity.js";
import { DisputeRow } from "./dispute.entity.js";
import { disputeJobs, writeNewDispute } from "./store.js";

/** How long a merchant has to answer a new dispute with evidence. */
const evidenceWindowMs = 7 * 24 * 60 * 60 * 1000;

/**
 * Opens a dispute on a succeeded payment whose row the caller has locked: amount = amount_received,
 * evidence due in 7 days (then it expires). One dispute per payment.
 */
export async function openDispute(em: EntityManager, app: App, payment: PaymentRow, reason: string): Promise<DisputeRow> {
  if (payment.status !== "succeeded") {
    throw new ApiError("IR_14", `A dispute needs a succeeded payment; this payment's status is ${payment.status}`);
  }
  const existing = await em.existsBy(DisputeRow, {
    merchantId: payment.merchantId,
    livemode: payment.livemode,
    paymentId: payment.paymentId,
  });
  if (existing) throw new ApiError("IR_16", `Payment ${payment.paymentId} already has a dispute`);
  const now = app.clock.now();
  const row = Object.assign(new DisputeRow(), {
    merchantId: payment.merchantId,
    livemode: payment.livemode,
    disputeId: newId("dis"),
    paymentId: payment.paymentId,
    status: "opened",
    amount: payment.amountReceived ?? payment.amount,
    currency: payment.currency,
    reason,
    evidenceDueBy: new Date(now.getTime() + evidenceWindowMs),
    evidence: null,
    metadata: {},
    created: now,
    updated: now,
  } satisfies DisputeRow);
  await writeNewDispute(em, app, row, [
    { kind: disputeJobs.expire, merchantId: row.merchantId, livemode: row.livemode, objectId: row.disputeId, runAt: row.evidenceDueBy },
  ]);
  return row;
}
