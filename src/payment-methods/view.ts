import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { PaymentMethodObjectSchema } from "../../gen/paymentservice/v1/payment_method_pb.js";
import { PaymentMethod } from "../../gen/paymentservice/v1/payment_pb.js";
import { addressFromStore } from "../validation/address.js";
import type { PaymentMethodRow } from "./payment-method.entity.js";

/** The API view of a saved payment method: its card's last four digits, brand, expiry and fingerprint, never its number. */
export function toPaymentMethod(row: PaymentMethodRow): MessageInitShape<typeof PaymentMethodObjectSchema> {
  return {
    paymentMethodId: row.paymentMethodId,
    merchantId: row.merchantId,
    customerId: row.customerId ?? undefined,
    paymentMethod: PaymentMethod.CARD,
    paymentMethodType: row.paymentMethodType ?? undefined,
    card: {
      last4: row.cardLast4,
      brand: row.cardBrand,
      expMonth: String(row.cardExpMonth).padStart(2, "0"),
      expYear: String(row.cardExpYear),
      cardHolderName: row.cardHolderName ?? undefined,
      fingerprint: row.cardFingerprint,
    },
    billing: addressFromStore(row.billing),
    metadata: row.metadata,
    created: timestampFromDate(row.created),
    updated: timestampFromDate(row.updated),
  };
}
