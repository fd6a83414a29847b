import type { MessageInitShape } from "@bufbuild/protobuf";
import type { DataSource } from "typeorm";
import type { RefundSchema } from "../../../gen/paymentservice/v1/refund_pb.js";
import type { Clock } from "../../clock.js";
import type { Scope } from "../../db/scope.js";
import type { CallValues } from "../../db/unit-of-work.js";
import { ApiError, refundExceedsCaptured } from "../../errors.js";
import { newId } from "../../ids.js";
import { jobKinds } from "../../jobs/kinds.js";
import { jobFor, type JobWaker } from "../../jobs/runner.js";
import { objectBusy, waitingForClaims } from "../../objects/claims.js";
import type { ObjectWriter } from "../../objects/writer.js";
import { RefundRow } from "../refund.entity.js";
import { refundablePayment, refundResource } from "../store.js";

/*
 * Create (interface §4, decisions §9): reads what the payment has left to refund, then writes the
 * refund, pending, with its event and its processing job in one statement that locks the payment and
 * checks the amount again on its row (store.ts), batched with other calls' refunds. The job runner
 * sends it to the processor right after the commit (instant) or at the settlement run (scheduled):
 * the refund is recorded before anyone asks the processor (operations/process.ts).
 */

/** What a create needs: the database and its writer, time, the job runner to wake, and how long scheduled refunds wait. */
export interface RefundCreateDependencies {
  readonly dataSource: DataSource;
  readonly clock: Clock;
  readonly writer: ObjectWriter;
  readonly jobs: JobWaker;
  readonly scheduledRefundDelayMs: number;
}

/** A refund as the API validated it (service.ts). */
export interface RefundRequest {
  readonly paymentId: string;
  /** Undefined: all that is left to refund. */
  readonly amount: bigint | undefined;
  readonly reason: string | null;
  readonly scheduled: boolean;
  readonly metadata: Record<string, string>;
}

/**
 * Creates a refund as the API call `ctx`, waiting while an operation holds its payment: the refund's
 * view, or the error that stops it (nothing left to refund, a status or a dispute that forbids it).
 */
export async function createRefund(
  deps: RefundCreateDependencies,
  ctx: CallValues & { readonly signal?: AbortSignal },
  scope: Scope,
  request: RefundRequest,
): Promise<MessageInitShape<typeof RefundSchema>> {
  const create = async () => {
    const now = deps.clock.now();
    const payment = await refundablePayment(deps.dataSource.manager, scope, request.paymentId, now);
    const amount = request.amount ?? payment.left;
    if (payment.left === 0n || amount > payment.left) throw refundExceedsCaptured(request.amount, payment.left);
    const refund = Object.assign(new RefundRow(), {
      merchantId: scope.merchantId,
      livemode: scope.livemode,
      refundId: newId("ref"),
      paymentId: request.paymentId,
      profileId: payment.profileId,
      status: "pending",
      amount,
      currency: payment.currency,
      reason: request.reason,
      refundType: request.scheduled ? "scheduled" : "instant",
      errorCode: null,
      errorMessage: null,
      metadata: request.metadata,
      processorReference: null,
      created: now,
      updated: now,
      claimToken: null,
      claimedUntil: null,
    } satisfies RefundRow);
    const delayMs = request.scheduled ? deps.scheduledRefundDelayMs : 0;
    const job = jobFor(jobKinds.processRefund, refund, refund.refundId, new Date(now.getTime() + delayMs));
    try {
      return await deps.writer.create(ctx, refundResource, refund, [job]);
    } catch (error) {
      // "All that is left" shrank between the read and the write: read it again.
      if (request.amount === undefined && error instanceof ApiError && error.code === "IR_13")
        throw objectBusy("the refundable amount changed");
      throw error;
    }
  };
  const refund = await waitingForClaims(create, ctx.signal);
  if (!request.scheduled) deps.jobs.wake();
  return refund;
}
