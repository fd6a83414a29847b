import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { RefundReasonSchema, RefundStatusSchema, RefundTypeSchema, type RefundSchema } from "../../gen/paymentservice/v1/refund_pb.js";
import { enumNumber } from "../enum-words.js";
import type { RefundRow } from "./refund.entity.js";

/** The API view of a refund. */
export function toRefund(row: RefundRow): MessageInitShape<typeof RefundSchema> {
  return {
    refundId: row.refundId,
    paymentId: row.paymentId,
    merchantId: row.merchantId,
    status: enumNumber(RefundStatusSchema, row.status),
    amount: row.amount,
    currency: row.currency,
    reason: row.reason === null ? undefined : enumNumber(RefundReasonSchema, row.reason),
    refundType: enumNumber(RefundTypeSchema, row.refundType),
    errorCode: row.errorCode ?? undefined,
    errorMessage: row.errorMessage ?? undefined,
    metadata: row.metadata,
    created: timestampFromDate(row.created),
    updated: timestampFromDate(row.updated),
  };
}
