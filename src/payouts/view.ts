import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { PayoutPrioritySchema, PayoutStatusSchema, PayoutTypeSchema, type PayoutSchema } from "../../gen/paymentservice/v1/payout_pb.js";
import { enumNumber } from "../enum-words.js";
import { addressFromStore } from "../validation/address.js";
import type { PayoutRow } from "./payout.entity.js";

/** The API view of a payout: the destination masked, attempts oldest first. */
export function toPayout(row: PayoutRow): MessageInitShape<typeof PayoutSchema> {
  const destination = row.destination;
  return {
    payoutId: row.payoutId,
    merchantId: row.merchantId,
    profileId: row.profileId,
    customerId: row.customerId ?? undefined,
    status: enumNumber(PayoutStatusSchema, row.status),
    amount: row.amount,
    currency: row.currency,
    payoutType: enumNumber(PayoutTypeSchema, row.payoutType),
    priority: enumNumber(PayoutPrioritySchema, row.priority),
    email: row.email ?? undefined,
    name: row.name ?? undefined,
    phone: row.phone ?? undefined,
    payoutMethodData:
      "card" in destination
        ? { card: { last4: destination.card.last4, expMonth: destination.card.exp_month, expYear: destination.card.exp_year } }
        : { bank: { last4: destination.bank.last4, bankName: destination.bank.bank_name } },
    billing:
      row.billing === null
        ? undefined
        : { address: addressFromStore(row.billing.address ?? null), phone: row.billing.phone, email: row.billing.email },
    processor: row.processor ?? undefined,
    confirm: row.confirm,
    errorCode: row.errorCode ?? undefined,
    errorMessage: row.errorMessage ?? undefined,
    attempts: row.attempts.map((attempt) => ({
      attemptId: attempt.attempt_id,
      status: enumNumber(PayoutStatusSchema, attempt.status),
      processor: attempt.processor,
      errorCode: attempt.error_code,
      errorMessage: attempt.error_message,
      created: timestampFromDate(new Date(attempt.created)),
    })),
    metadata: row.metadata,
    created: timestampFromDate(row.created),
    updated: timestampFromDate(row.updated),
  };
}
