import type { EntityManager } from "typeorm";
import type { Clock } from "../clock.js";
import type { Scope } from "../db/scope.js";
import type { CardDetails } from "../processors/processor.js";
import { writePaymentMethodEvent } from "./events.js";
import { PaymentMethodRow } from "./payment-method.entity.js";
import { assertCustomerExists, lockCustomersCard, tokenLifetimeMs } from "./store.js";
import { cardFingerprints, newCardPaymentMethod, type VaultSecrets } from "./vault.js";

/*
 * A payment that saves its card for its customer (setup_future_usage, decisions §10). The card is
 * saved in the transaction that records the payment's attempt, before the processor is asked,
 * pending on the payment; the payment's outcome settles it in the transaction that writes it: the
 * customer's once the payment succeeds or is authorized, deleted if the payment fails. A crash in
 * between leaves the attempt, whose recovery writes the outcome, and so settles the card too.
 */

/** What saving a payment's card needs: time and the vault's secrets. */
export interface CardSavingDependencies extends VaultSecrets {
  readonly clock: Clock;
}

/** The card a payment saves, for whom. */
export interface CardToSave {
  readonly customerId: string;
  readonly paymentId: string;
  readonly card: CardDetails;
  /** The client-side token the payment pays with, which becomes the customer's payment method. */
  readonly token?: string;
}

/**
 * Saves the payment's card for its customer, pending on the payment, in `em`'s transaction (the one
 * recording the attempt): the customer's payment method of that card if it has one already (pending
 * or not: never a second one), else the token it pays with, else a new one. Its id, which the payment
 * shows. 404 naming customer_id when the customer is gone.
 */
export async function saveForPayment(em: EntityManager, deps: CardSavingDependencies, scope: Scope, save: CardToSave): Promise<string> {
  await assertCustomerExists(em, scope, save.customerId, "customer_id", "lock");
  const saved = await lockCustomersCard(em, scope, save.customerId, cardFingerprints(deps.hasher, scope.merchantId, save.card.number).all);
  if (saved !== null) return saved.paymentMethodId;
  const now = deps.clock.now();
  const expiresAt = new Date(now.getTime() + tokenLifetimeMs);
  if (save.token !== undefined) {
    await em.query(
      `UPDATE payment_methods SET customer_id = $4, pending_payment_id = $5, expires_at = $6, updated = $7
        WHERE merchant_id = $1 AND livemode = $2 AND payment_method_id = $3 AND customer_id IS NULL AND used_by_payment_id = $5`,
      [scope.merchantId, scope.livemode, save.token, save.customerId, save.paymentId, expiresAt, now],
    );
    return save.token;
  }
  const { row } = newCardPaymentMethod(
    deps,
    scope,
    save.card,
    { customerId: save.customerId, billing: null, metadata: {}, expiresAt, pendingPaymentId: save.paymentId },
    now,
  );
  await em.insert(PaymentMethodRow, row);
  return row.paymentMethodId;
}

/** The payment whose outcome settles the card it saves. */
export interface SavingPayment {
  readonly paymentId: string;
  readonly paymentMethodId: string;
  /** Its profile, whose webhook_url hears of the attachment. */
  readonly profileId: string;
  /** The expiry the payment's card was authorized with, which renews the customer's payment method. */
  readonly expiry: { readonly month: number; readonly year: number } | undefined;
}

/**
 * Settles the card a payment saves, in the transaction writing its outcome. Authorized (`saved`): the
 * payment method is the customer's, with the expiry just authorized; one that was pending is announced
 * attached. Not authorized: one still pending on this payment is deleted (the payment still names it,
 * as a failed payment names the card it tried).
 */
export async function settleSavedCard(
  em: EntityManager,
  clock: Clock,
  scope: Scope,
  payment: SavingPayment,
  saved: boolean,
): Promise<void> {
  const now = clock.now();
  if (!saved) {
    await dropPendingCard(em, scope, payment.paymentMethodId, payment.paymentId, now);
    return;
  }
  const row = await em.findOne(PaymentMethodRow, {
    where: { merchantId: scope.merchantId, livemode: scope.livemode, paymentMethodId: payment.paymentMethodId },
    lock: { mode: "pessimistic_write" },
  });
  if (row === null || row.deletedAt !== null || row.customerId === null) return;
  const attaches = row.pendingPaymentId !== null;
  Object.assign(row, { pendingPaymentId: null, expiresAt: null, updated: now });
  if (payment.expiry !== undefined) Object.assign(row, { cardExpMonth: payment.expiry.month, cardExpYear: payment.expiry.year });
  await em.save(row);
  if (attaches) await writePaymentMethodEvent(em, clock, row, "attached", payment.profileId);
}

/**
 * The card pending on a payment that was not authorized: handed over to another setup of the same
 * card for the customer still waiting for its outcome (it found this card pending when it was
 * recorded), else deleted. The customer's row is locked first, as every save of a card for the
 * customer locks it (store.ts): a setup recorded before this sees the card and is seen here; one
 * recorded after finds it gone and saves the card anew.
 */
async function dropPendingCard(em: EntityManager, scope: Scope, paymentMethodId: string, paymentId: string, now: Date): Promise<void> {
  const [pending] = (await em.query(
    `SELECT customer_id FROM payment_methods
      WHERE merchant_id = $1 AND livemode = $2 AND payment_method_id = $3 AND pending_payment_id = $4 AND deleted_at IS NULL`,
    [scope.merchantId, scope.livemode, paymentMethodId, paymentId],
  )) as { customer_id: string }[];
  if (pending === undefined) return;
  await em.query("SELECT 1 FROM customers WHERE merchant_id = $1 AND livemode = $2 AND customer_id = $3 FOR UPDATE", [
    scope.merchantId,
    scope.livemode,
    pending.customer_id,
  ]);
  const [, handedOver] = (await em.query(
    `UPDATE payment_methods SET pending_payment_id = waiting.payment_id, updated = $5
       FROM (SELECT payment_id FROM payments
              WHERE merchant_id = $1 AND livemode = $2 AND payment_method_id = $3 AND payment_id <> $4 AND setup_future_usage IS NOT NULL
                AND status IN ('requires_payment_method', 'requires_confirmation', 'processing', 'requires_action')
              LIMIT 1) AS waiting
      WHERE merchant_id = $1 AND livemode = $2 AND payment_method_id = $3 AND pending_payment_id = $4 AND deleted_at IS NULL`,
    [scope.merchantId, scope.livemode, paymentMethodId, paymentId, now],
  )) as [unknown, number];
  if (handedOver > 0) return;
  await em.query(
    `UPDATE payment_methods SET deleted_at = $5, card_ciphertext = NULL, expires_at = NULL, updated = $5
      WHERE merchant_id = $1 AND livemode = $2 AND payment_method_id = $3 AND pending_payment_id = $4 AND deleted_at IS NULL`,
    [scope.merchantId, scope.livemode, paymentMethodId, paymentId, now],
  );
}
