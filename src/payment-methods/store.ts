import { In, IsNull, type EntityManager } from "typeorm";
import type { Scope } from "../db/scope.js";
import type { Clock } from "../clock.js";
import { notFound } from "../errors.js";
import { revokeMandatesOf } from "../mandates/store.js";
import { writePaymentMethodEvent } from "./events.js";
import { PaymentMethodRow } from "./payment-method.entity.js";

/** How long a client-side token nothing attached is kept (decisions §10), and a card saved by a payment whose outcome is unknown. */
export const tokenLifetimeMs = 24 * 60 * 60 * 1000;

/** A live payment method's key: its merchant, environment and id, not deleted, nor pending on a payment that saves it. */
export function liveMethod(scope: Scope, paymentMethodId: string) {
  return { merchantId: scope.merchantId, livemode: scope.livemode, paymentMethodId, deletedAt: IsNull(), pendingPaymentId: IsNull() };
}

/** Loads a live payment method and locks its row for the transaction (attach vs delete, two updates). */
export async function lockPaymentMethod(em: EntityManager, scope: Scope, paymentMethodId: string): Promise<PaymentMethodRow> {
  const row = await em.findOne(PaymentMethodRow, { where: liveMethod(scope, paymentMethodId), lock: { mode: "pessimistic_write" } });
  if (row === null) throw notFound("Payment method", paymentMethodId);
  return row;
}

/**
 * Refuses (404 naming `field`) a customer that is not the merchant's, or was deleted. Read from its
 * table rather than through customers/, which deletes its customers' payment methods: the two
 * folders would import each other. With `lock`, the customer's row is locked until the transaction
 * ends: every save of a card for a customer locks it first, so two saves of one card, on any
 * instances, run one after the other and the second finds the first (never a duplicate), and a
 * customer deleted meanwhile gets no card.
 */
export async function assertCustomerExists(
  em: EntityManager,
  scope: Scope,
  customerId: string,
  field: string,
  lock: "lock" | "read",
): Promise<void> {
  const found = (await em.query(
    `SELECT 1 FROM customers WHERE merchant_id = $1 AND livemode = $2 AND customer_id = $3 AND deleted_at IS NULL${lock === "lock" ? " FOR UPDATE" : ""}`,
    [scope.merchantId, scope.livemode, customerId],
  )) as unknown[];
  if (found.length === 0) throw notFound("Customer", customerId, field);
}

/**
 * The customer's live payment method of this card, under any fingerprint it may have been saved under,
 * locked; the caller holds the customer's lock (`assertCustomerExists`), so no other save races it.
 */
export function lockCustomersCard(
  em: EntityManager,
  scope: Scope,
  customerId: string,
  fingerprints: readonly string[],
): Promise<PaymentMethodRow | null> {
  return em.findOne(PaymentMethodRow, {
    where: {
      merchantId: scope.merchantId,
      livemode: scope.livemode,
      customerId,
      cardFingerprint: In([...fingerprints]),
      deletedAt: IsNull(),
    },
    lock: { mode: "pessimistic_write" },
  });
}

/**
 * Deletes payment methods, in the caller's transaction: each can no longer pay, its encrypted number
 * is dropped and its mandates are revoked; one that was attached to a customer is announced detached.
 * The row stays, so that its id is known. How many were live.
 */
export async function deletePaymentMethods(
  em: EntityManager,
  clock: Clock,
  scope: Scope,
  which: { readonly paymentMethodId: string } | { readonly customerId: string },
): Promise<number> {
  const now = clock.now();
  const rows = await em.find(PaymentMethodRow, {
    where:
      "paymentMethodId" in which
        ? liveMethod(scope, which.paymentMethodId)
        : { merchantId: scope.merchantId, livemode: scope.livemode, customerId: which.customerId, deletedAt: IsNull() },
    order: { paymentMethodId: "ASC" },
    lock: { mode: "pessimistic_write" },
  });
  if (rows.length === 0) return 0;
  await em.query(
    `UPDATE payment_methods SET deleted_at = $4, card_ciphertext = NULL, expires_at = NULL, updated = $4
      WHERE merchant_id = $1 AND livemode = $2 AND payment_method_id = ANY ($3)`,
    [scope.merchantId, scope.livemode, rows.map((row) => row.paymentMethodId), now],
  );
  for (const row of rows) {
    await revokeMandatesOf(em, clock, scope, row.paymentMethodId);
    if (row.customerId !== null && row.pendingPaymentId === null) {
      await writePaymentMethodEvent(em, clock, Object.assign(row, { deletedAt: now, cardCiphertext: null, updated: now }), "detached");
    }
  }
  return rows.length;
}

/** Payment methods removed per statement: short statements, so the reaper never holds many row locks for long. */
const reapBatch = 1000;

/**
 * Deletes the client-side tokens nothing attached within 24 hours (decisions §10), a batch at a time
 * until none is left; instances reaping at once skip each other's batches. How many went.
 */
export async function reapExpiredTokens(em: EntityManager, now: Date): Promise<number> {
  let reaped = 0;
  for (;;) {
    const [, count] = (await em.query(
      `UPDATE payment_methods SET deleted_at = $1, card_ciphertext = NULL, expires_at = NULL, updated = $1
        WHERE ctid = ANY (ARRAY(SELECT ctid FROM payment_methods WHERE expires_at <= $1 LIMIT ${reapBatch} FOR UPDATE SKIP LOCKED))`,
      [now],
    )) as [unknown, number];
    reaped += count;
    if (count < reapBatch) return reaped;
  }
}
