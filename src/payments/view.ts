import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  CaptureMethodSchema,
  NextActionTypeSchema,
  PaymentMethodSchema,
  PaymentStatusSchema,
  SetupFutureUsageSchema,
  type PaymentSchema,
} from "../../gen/paymentservice/v1/payment_pb.js";
import { enumNumber } from "../enum-words.js";
import type { PaymentRow } from "./payment.entity.js";

/** The API view of a payment: the full object every payment response returns (decisions §4). */
export function toPayment(row: PaymentRow): MessageInitShape<typeof PaymentSchema> {
  return {
    paymentId: row.paymentId,
    merchantId: row.merchantId,
    profileId: row.profileId,
    status: enumNumber(PaymentStatusSchema, row.status),
    amount: row.amount,
    amountReceived: row.amountReceived ?? undefined,
    amountCapturable: row.amountCapturable,
    currency: row.currency,
    captureMethod: enumNumber(CaptureMethodSchema, row.captureMethod),
    captureOn: row.captureOn === null ? undefined : timestampFromDate(row.captureOn),
    paymentMethod: row.paymentMethod === null ? undefined : enumNumber(PaymentMethodSchema, row.paymentMethod),
    paymentMethodType: row.paymentMethodType ?? undefined,
    paymentMethodId: row.paymentMethodId ?? undefined,
    paymentMethodData:
      row.card === null
        ? undefined
        : { card: { last4: row.card.last4, brand: row.card.brand, expMonth: row.card.exp_month, expYear: row.card.exp_year } },
    customerId: row.customerId ?? undefined,
    email: row.email ?? undefined,
    description: row.description ?? undefined,
    statementDescriptor: row.statementDescriptor ?? undefined,
    clientSecret: row.clientSecret,
    returnUrl: row.returnUrl ?? undefined,
    nextAction:
      row.nextAction === null
        ? undefined
        : { type: enumNumber(NextActionTypeSchema, row.nextAction.type), redirectToUrl: row.nextAction.redirect_to_url },
    errorCode: row.errorCode ?? undefined,
    errorMessage: row.errorMessage ?? undefined,
    cancellationReason: row.cancellationReason ?? undefined,
    metadata: row.metadata,
    created: timestampFromDate(row.created),
    modifiedAt: timestampFromDate(row.modifiedAt),
    setupFutureUsage: row.setupFutureUsage === null ? undefined : enumNumber(SetupFutureUsageSchema, row.setupFutureUsage),
    offSession: row.offSession,
    // A setup's mandate is shown once written, when the payment succeeds.
    mandateId: row.mandateRequest === null ? (row.mandateId ?? undefined) : undefined,
  };
}
