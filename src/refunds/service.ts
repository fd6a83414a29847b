import type { ServiceImpl } from "@connectrpc/connect";
import type { DataSource } from "typeorm";
import {
  RefundReasonSchema,
  RefundStatusSchema,
  RefundType,
  RefundTypeSchema,
  type RefundReason,
  type RefundService,
} from "../../gen/paymentservice/v1/refund_pb.js";
import { merchantOf } from "../auth/caller.js";
import type { Clock } from "../clock.js";
import { fetchPage, scopedQuery } from "../db/list-query.js";
import { sentWord } from "../enum-words.js";
import { ApiError, invalidRequest, missingField, preconditionFailed, refundExceedsCaptured } from "../errors.js";
import { newId } from "../ids.js";
import { lockUnclaimed, objectBusy, waitingForClaims } from "../objects/claims.js";
import { findObject } from "../objects/resource.js";
import type { ObjectWriter } from "../objects/writer.js";
import type { UnitOfWork } from "../db/unit-of-work.js";
import { jobKinds } from "../jobs/kinds.js";
import { jobFor, type JobWaker } from "../jobs/runner.js";
import { envelope, pageOf } from "../validation/list.js";
import { mergeMetadata, newMetadata } from "../validation/metadata.js";
import { positiveAmount } from "../validation/money.js";
import { RefundRow } from "./refund.entity.js";
import { refundStates } from "./states.js";
import { refundablePayment, refundResource, writeRefundChange } from "./store.js";
import { toRefund } from "./view.js";

/** What the refunds API needs: the database, time, the job runner to wake, and how long scheduled refunds wait. */
export interface RefundDependencies {
  readonly dataSource: DataSource;
  readonly clock: Clock;
  readonly units: UnitOfWork;
  readonly writer: ObjectWriter;
  readonly jobs: JobWaker;
  readonly scheduledRefundDelayMs: number;
}

function reasonWord(reason: RefundReason | undefined): string | null {
  return sentWord(RefundReasonSchema, reason) ?? null;
}

/**
 * Refunds (interface §4, decisions §9). Create reads what the payment has left to refund, then writes
 * the refund with its event and its processing job in one statement that locks the payment and
 * checks the amount again on its row (src/refunds/store.ts), batched with other calls' refunds (with
 * the call's response when it has an idempotency key); the job runner
 * sends it to the processor right after the commit (instant) or at the settlement run (scheduled).
 * A payment or refund that an operation holds while it calls the processor is waited for.
 */
export function refundService(deps: RefundDependencies): ServiceImpl<typeof RefundService> {
  const { dataSource, clock, units } = deps;

  return {
    async createRefund(req, ctx) {
      const caller = merchantOf(ctx);
      if (req.paymentId === undefined || req.paymentId === "") throw missingField("payment_id");
      const paymentId = req.paymentId;
      const requested = req.amount === undefined ? undefined : positiveAmount("amount", req.amount);
      sentWord(RefundTypeSchema, req.refundType);
      const scheduled = req.refundType === RefundType.SCHEDULED;
      const create = async () => {
        const now = clock.now();
        const payment = await refundablePayment(dataSource.manager, caller, paymentId, now);
        const amount = requested ?? payment.left;
        if (payment.left === 0n || amount > payment.left) throw refundExceedsCaptured(requested, payment.left);
        const refund = Object.assign(new RefundRow(), {
          merchantId: caller.merchantId,
          livemode: caller.livemode,
          refundId: newId("ref"),
          paymentId,
          profileId: payment.profileId,
          status: "pending",
          amount,
          currency: payment.currency,
          reason: reasonWord(req.reason),
          refundType: scheduled ? "scheduled" : "instant",
          errorCode: null,
          errorMessage: null,
          metadata: newMetadata("metadata", req.metadata),
          processorReference: null,
          created: now,
          updated: now,
          claimToken: null,
          claimedUntil: null,
        } satisfies RefundRow);
        const delayMs = scheduled ? deps.scheduledRefundDelayMs : 0;
        const job = jobFor(jobKinds.processRefund, refund, refund.refundId, new Date(now.getTime() + delayMs));
        try {
          return await deps.writer.create(ctx, refundResource, refund, [job]);
        } catch (error) {
          // "All that is left" shrank between the read and the write: read it again.
          if (requested === undefined && error instanceof ApiError && error.code === "IR_13")
            throw objectBusy("the refundable amount changed");
          throw error;
        }
      };
      const refund = await waitingForClaims(create, ctx.signal);
      if (!scheduled) deps.jobs.wake();
      return refund;
    },

    async updateRefund(req, ctx) {
      const caller = merchantOf(ctx);
      if (req.amount !== undefined) throw invalidRequest("The field amount of a refund cannot be updated; create another refund");
      if (req.paymentId !== undefined) throw invalidRequest("The field payment_id of a refund cannot be updated");
      const update = () =>
        units.commit(ctx, async (em) => {
          const row = await lockUnclaimed(em, clock, refundResource, caller, req.refundId);
          if (req.reason !== undefined) row.reason = reasonWord(req.reason);
          row.metadata = mergeMetadata("metadata", row.metadata, req.metadata);
          row.updated = clock.now();
          await writeRefundChange(em, clock, row, row.status);
          return toRefund(row);
        });
      return waitingForClaims(update, ctx.signal);
    },

    async retrieveRefund(req, ctx) {
      const caller = merchantOf(ctx);
      return toRefund(await findObject(dataSource.manager, refundResource, caller, req.refundId));
    },

    async cancelRefund(req, ctx) {
      const caller = merchantOf(ctx);
      const cancel = () =>
        units.commit(ctx, async (em) => {
          const row = await lockUnclaimed(em, clock, refundResource, caller, req.refundId);
          if (row.refundType !== "scheduled") {
            throw preconditionFailed(`This refund cannot be cancelled: it is instant (${row.status}); only a pending scheduled refund can`);
          }
          refundStates.guard("cancel", row.status);
          refundStates.move(row, "cancel", "cancelled");
          row.updated = clock.now();
          await writeRefundChange(em, clock, row, "pending");
          return toRefund(row);
        });
      return waitingForClaims(cancel, ctx.signal);
    },

    async listRefunds(req, ctx) {
      const caller = merchantOf(ctx);
      const page = pageOf(req);
      const query = scopedQuery(dataSource, RefundRow, "r", caller);
      if (req.paymentId !== undefined) query.andWhere("r.payment_id = :paymentId", { paymentId: req.paymentId });
      const status = sentWord(RefundStatusSchema, req.status);
      if (status !== undefined) query.andWhere("r.status = :status", { status });
      const [rows, total] = await fetchPage(query, ["created", "refund_id"], page);
      return envelope(rows.map(toRefund), total, page);
    },
  };
}
