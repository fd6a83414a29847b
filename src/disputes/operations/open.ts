import type { EntityManager } from "typeorm";
import type { Clock } from "../../clock.js";
import { preconditionFailed } from "../../errors.js";
import { newId } from "../../ids.js";
import { jobKinds } from "../../jobs/kinds.js";
import { jobFor } from "../../jobs/runner.js";
import { writeNewObject } from "../../objects/writer.js";
import type { PaymentRow } from "../../payments/payment.entity.js";
import { paymentStates } from "../../payments/states.js";
import { DisputeRow } from "../dispute.entity.js";
import { disputeResource } from "../store.js";

/*
 * Open: a card network reports a dispute on a succeeded payment (the sandbox's dispute test card,
 * job `dispute.open_reported`, or the sandbox's OpenDispute). The dispute is written in the
 * transaction that locks its payment, whose row it changes (what the payment can still refund).
 */

/** How long a merchant has to answer a new dispute with evidence. */
const evidenceWindowMs = 7 * 24 * 60 * 60 * 1000;

/**
 * Opens a dispute on a succeeded payment whose row the caller has locked: amount = amount_received,
 * evidence due in 7 days (then it expires). One dispute per payment.
 */
export async function openDispute(em: EntityManager, clock: Clock, payment: PaymentRow, reason: string): Promise<DisputeRow> {
  paymentStates.guard("dispute", payment.status);
  if (await disputed(em, payment)) throw preconditionFailed(`Payment ${payment.paymentId} already has a dispute`);
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
  await writeNewObject(em, clock, disputeResource, row, [jobFor(jobKinds.expireDispute, row, row.disputeId, row.evidenceDueBy)]);
  return row;
}

/** Opens the dispute the network reported on a payment it locked, unless the payment moved on or has one already (the job ran before). */
export async function openReportedDispute(em: EntityManager, clock: Clock, payment: PaymentRow): Promise<void> {
  if (paymentStates.allows("dispute", payment.status) && !(await disputed(em, payment)))
    await openDispute(em, clock, payment, "fraudulent");
}

/** Whether the payment has a dispute. */
function disputed(em: EntityManager, payment: PaymentRow): Promise<boolean> {
  return em.existsBy(DisputeRow, { merchantId: payment.merchantId, livemode: payment.livemode, paymentId: payment.paymentId });
}
