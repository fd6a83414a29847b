import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { MandateStatusSchema, type MandateSchema } from "../../gen/paymentservice/v1/mandate_pb.js";
import { AcceptanceTypeSchema, MandateTypeSchema } from "../../gen/paymentservice/v1/payment_pb.js";
import { enumNumber } from "../enum-words.js";
import type { MandateRow } from "./mandate.entity.js";

/** The API view of a mandate. */
export function toMandate(row: MandateRow): MessageInitShape<typeof MandateSchema> {
  const acceptance = row.customerAcceptance;
  return {
    mandateId: row.mandateId,
    merchantId: row.merchantId,
    customerId: row.customerId,
    paymentMethodId: row.paymentMethodId,
    status: enumNumber(MandateStatusSchema, row.status),
    type: enumNumber(MandateTypeSchema, row.type),
    amountLimit: row.amountLimit ?? undefined,
    currency: row.currency ?? undefined,
    customerAcceptance: {
      acceptanceType: enumNumber(AcceptanceTypeSchema, acceptance.acceptance_type),
      acceptedAt: timestampFromDate(new Date(acceptance.accepted_at)),
      online: acceptance.online === null ? undefined : { ipAddress: acceptance.online.ip_address, userAgent: acceptance.online.user_agent },
    },
    created: timestampFromDate(row.created),
    updated: timestampFromDate(row.updated),
  };
}
