import type { DataSource } from "typeorm";
import { findByKey } from "../db/batched-reads.js";
import type { Scope } from "../db/scope.js";
import { invalidField, notFound, preconditionFailed } from "../errors.js";
import type { CardDetails } from "../processors/processor.js";
import type { DataCipher } from "../secrets/data-cipher.js";
import { PaymentMethodRow } from "./payment-method.entity.js";
import { openCardNumber } from "./vault.js";

/*
 * Paying with a saved payment method (decisions §10): what a payment's create or confirm needs of
 * it, the card to authorize, checked against what it may pay for.
 */

/** A saved payment method as a payment uses it: its card, and the customer it belongs to (null for a token). */
export interface SavedCard {
  readonly paymentMethodId: string;
  readonly customerId: string | null;
  /** Its card, as a processor takes it; no CVC is kept, so none is sent. */
  readonly card: CardDetails;
}

/**
 * The card of payment method `paymentMethodId` for `payment`, refusing what cannot pay: none of the
 * caller's (404 naming `payment_method_id`), a deleted one, a token that paid for another payment
 * already (400 IR_16), another customer's or, off-session, a token (400 IR_05). A token is taken for the payment here, so
 * no second payment can use it; the same payment (a retry) may again.
 */
export async function savedCard(
  deps: { readonly dataSource: DataSource; readonly dataCipher: DataCipher },
  scope: Scope,
  paymentMethodId: string,
  payment: { readonly paymentId: string; readonly customerId: string | null; readonly offSession?: boolean },
): Promise<SavedCard> {
  const row = await findByKey(deps.dataSource.manager, PaymentMethodRow, "paymentMethodId", scope, paymentMethodId);
  // One still pending on the payment saving it is not known until that payment succeeds.
  if (row === undefined || row.pendingPaymentId !== null) throw notFound("Payment method", paymentMethodId, "payment_method_id");
  if (row.deletedAt !== null || row.cardCiphertext === null) {
    throw preconditionFailed(`Payment method ${paymentMethodId} was deleted and can no longer pay (field payment_method_id)`);
  }
  payingCustomer(row, payment.customerId);
  if (row.customerId === null && payment.offSession === true) {
    throw invalidField(
      "payment_method_id",
      "an off-session payment charges a customer's saved card under its mandate, not a client-side token",
    );
  }
  if (row.customerId === null) {
    const [, taken] = (await deps.dataSource.query(
      `UPDATE payment_methods SET used_by_payment_id = $4
        WHERE merchant_id = $1 AND livemode = $2 AND payment_method_id = $3 AND customer_id IS NULL AND deleted_at IS NULL
          AND (used_by_payment_id IS NULL OR used_by_payment_id = $4)`,
      [scope.merchantId, scope.livemode, paymentMethodId, payment.paymentId],
    )) as [unknown, number];
    if (taken === 0) {
      throw preconditionFailed(
        `Payment method ${paymentMethodId} is a client-side token that paid for another payment already; attach it to a customer to pay with it again (field payment_method_id)`,
      );
    }
  }
  return {
    paymentMethodId,
    customerId: row.customerId,
    card: {
      number: openCardNumber(deps.dataCipher, { ...row, cardCiphertext: row.cardCiphertext }),
      expMonth: row.cardExpMonth,
      expYear: row.cardExpYear,
      cvc: "",
      holderName: row.cardHolderName ?? undefined,
    },
  };
}

/**
 * The customer a payment paid with `saved` belongs to: the payment's own, which must be the payment
 * method's when it has one (400 IR_05 naming payment_method_id), or else the payment method's.
 */
export function payingCustomer(saved: { readonly customerId: string | null }, paymentCustomerId: string | null): string | null {
  if (saved.customerId === null || paymentCustomerId === null) return paymentCustomerId ?? saved.customerId;
  if (saved.customerId !== paymentCustomerId) {
    throw invalidField("payment_method_id", "it belongs to another customer than the payment's");
  }
  return paymentCustomerId;
}
