import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { DisputeStatusSchema, type DisputeSchema } from "../../gen/paymentservice/v1/dispute_pb.js";
import { enumNumber } from "../enum-words.js";
import type { DisputeRow } from "./dispute.entity.js";

/** The API view of a dispute. */
export function toDispute(row: DisputeRow): MessageInitShape<typeof DisputeSchema> {
  const e = row.evidence;
  return {
    disputeId: row.disputeId,
    paymentId: row.paymentId,
    merchantId: row.merchantId,
    status: enumNumber(DisputeStatusSchema, row.status),
    amount: row.amount,
    currency: row.currency,
    reason: row.reason ?? undefined,
    evidenceDueBy: timestampFromDate(row.evidenceDueBy),
    evidence:
      e === null
        ? undefined
        : {
            uncategorizedText: e.uncategorized_text,
            customerCommunication: e.customer_communication,
            receipt: e.receipt,
            shippingDocumentation: e.shipping_documentation,
            productDescription: e.product_description,
            refundPolicy: e.refund_policy,
          },
    metadata: row.metadata,
    created: timestampFromDate(row.created),
    updated: timestampFromDate(row.updated),
  };
}
