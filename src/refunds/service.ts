import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  RefundReasonSchema,
  RefundStatusSchema,
  RefundType,
  RefundTypeSchema,
  type RefundReason,
  type RefundService,
} from "../../gen/paymentservice/v1/refund_pb.js";
import { merchantOf } from "../auth/caller.js";
import { fetchPage, scopedQuery } from "../db/list-query.js";
import type { UnitOfWork } from "../db/unit-of-work.js";
import { sentWord } from "../enum-words.js";
import { invalidRequest, missingField } from "../errors.js";
import type { NewJob } from "../jobs/runner.js";
import { waitingForClaims } from "../objects/claims.js";
import { runLocked, type LockedOperation } from "../objects/locked-operation.js";
import { findObject } from "../objects/resource.js";
import { envelope, pageOf } from "../validation/list.js";
import { newMetadata } from "../validation/metadata.js";
import { positiveAmount } from "../validation/money.js";
import { cancelOperation } from "./operations/cancel.js";
import { createRefund, type RefundCreateDependencies } from "./operations/create.js";
import { updateOperation } from "./operations/update.js";
import { RefundRow } from "./refund.entity.js";
import { refundResource } from "./store.js";
import { toRefund } from "./view.js";

/** What the refunds API needs: what a create needs, and the transactions of an update or a cancel. */
export interface RefundDependencies extends RefundCreateDependencies {
  readonly units: UnitOfWork;
}

function reasonWord(reason: RefundReason | undefined): string | null {
  return sentWord(RefundReasonSchema, reason) ?? null;
}

/**
 * Refunds (interface §4, decisions §9): each call validates its request and runs its operation
 * (operations/): create, update and cancel here, processing in the job (jobs.ts). A payment or refund
 * that an operation holds while it calls the processor is waited for.
 */
export function refundService(deps: RefundDependencies): ServiceImpl<typeof RefundService> {
  const { dataSource, clock, units } = deps;

  /** Runs an operation on a refund in the transaction that commits the call, after any claim on it. */
  function changeRefund(ctx: HandlerContext, operation: LockedOperation<RefundRow, readonly NewJob[]>) {
    const commit = () => units.commit(ctx, async (em) => toRefund(await runLocked(em, clock, refundResource, operation)));
    return waitingForClaims(commit, ctx.signal);
  }

  return {
    async createRefund(req, ctx) {
      const caller = merchantOf(ctx);
      if (req.paymentId === undefined || req.paymentId === "") throw missingField("payment_id");
      const amount = req.amount === undefined ? undefined : positiveAmount("amount", req.amount);
      sentWord(RefundTypeSchema, req.refundType);
      return createRefund(deps, ctx, caller, {
        paymentId: req.paymentId,
        amount,
        reason: reasonWord(req.reason),
        scheduled: req.refundType === RefundType.SCHEDULED,
        metadata: newMetadata("metadata", req.metadata),
      });
    },

    async updateRefund(req, ctx) {
      const caller = merchantOf(ctx);
      if (req.amount !== undefined) throw invalidRequest("The field amount of a refund cannot be updated; create another refund");
      if (req.paymentId !== undefined) throw invalidRequest("The field payment_id of a refund cannot be updated");
      const reason = req.reason === undefined ? undefined : reasonWord(req.reason);
      return changeRefund(ctx, updateOperation(clock, caller, req.refundId, { reason, metadata: req.metadata }));
    },

    async retrieveRefund(req, ctx) {
      const caller = merchantOf(ctx);
      return toRefund(await findObject(dataSource.manager, refundResource, caller, req.refundId));
    },

    async cancelRefund(req, ctx) {
      return changeRefund(ctx, cancelOperation(clock, merchantOf(ctx), req.refundId));
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
