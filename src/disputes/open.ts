import type { EntityManager } from "typeorm";
import type { Clock } from "../clock.js";
import { preconditionFailed } from "../errors.js";
import { newId } from "../ids.js";
import { jobKinds } from "../jobs/kinds.js";
import { jobFor } from "../jobs/runner.js";
import type { PaymentRow } from "../payments/payment.entity.js";
import { paymentStates } from "../payments/states.js";
import { DisputeRow } from "./dispute.entity.js";
import { writeNewDispute } from "./store.js";

/** How long a merchant has to answer a new dispute with evidence. */
const evidenceWindowMs = 7 * 24 * 60 * 60 * 1000;

/**
 * Opens a dispute on a succeeded payment whose row the caller has locked: amount = amount_received,
 * evidence due in 7 days (then it expires). One dispute per payment.
 */
export async function openDispute(em: EntityManager, clock: Clock, payment: PaymentRow, reason: string): Promise<DisputeRow> {
  paymentStates.guard("dispute", payment.status);
  const existing = await em.existsBy(DisputeRow, {
    merchantId: payment.merchantId,
    livemode: payment.livemode,
    paymentId: payment.paymentId,
  });
  if (existing) throw preconditionFailed(`Payment ${payment.paymentId} already has a dispute`);
  const now = clock.now();
  const row = Object.assign(new DisputeRow(), {
    merchantId: payment.merchantId,
    livemode: payment.livemode,
    disputeId: newId("dis"),
    paymentId: payment.paymentId,
    profileId: payment.profileId,
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
  await writeNewDispute(em, clock, row, [jobFor(jobKinds.expireDispute, row, row.disputeId, row.evidenceDueBy)]);
  return row;
}
