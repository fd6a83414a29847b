import type { DataSource } from "typeorm";
import type { ApiKeyHasher } from "../auth/api-key-secret.js";
import type { Scope } from "../db/scope.js";
import { newId } from "../ids.js";
import { cardView } from "../processors/card.js";
import type { CardDetails } from "../processors/processor.js";
import type { AddressJson } from "../validation/address.js";
import { PaymentMethodRow } from "./payment-method.entity.js";
import type { DataCipher } from "../secrets/data-cipher.js";
import type { SealedColumn } from "../secrets/sealed-columns.js";

/*
 * What is kept of a saved card's number: its keyed fingerprint, to recognise the same card, and the
 * number itself encrypted, to pay with it. Neither can be turned back into the number without a
 * server secret, which the database never holds.
 */

/** Bytes of the HMAC a fingerprint keeps: 16 characters of base64url, as short as Stripe's. */
const fingerprintBytes = 12;

/**
 * The fingerprints a card number may have been saved under by merchant `merchantId`: under
 * API_KEY_HASH_SECRET (`current`, what new payment methods store), and while that secret is rotated
 * under the previous or next one too. Keyed per merchant, so one card has unrelated fingerprints at
 * two merchants, and by a server secret, so a leaked table cannot be matched against card numbers.
 */
export function cardFingerprints(hasher: ApiKeyHasher, merchantId: string, number: string): { current: string; all: string[] } {
  const hashes = hasher.hashes(`card-fingerprint\n${merchantId}\n${number}`);
  const shown = (hash: Buffer) => hash.subarray(0, fingerprintBytes).toString("base64url");
  const all = [hashes.current, hashes.previous, hashes.next].filter((hash): hash is Buffer => hash !== undefined).map(shown);
  return { current: all[0]!, all };
}

/** What the vault needs: the fingerprints' secret and the cipher of the numbers. */
export interface VaultSecrets {
  readonly hasher: ApiKeyHasher;
  readonly dataCipher: DataCipher;
}

/** Who a payment method belongs to, and how it starts out besides its card. */
export interface NewPaymentMethod {
  readonly customerId: string | null;
  readonly billing: AddressJson | null;
  readonly metadata: Record<string, string>;
  /** When it is removed unless attached (a token), or unless its saving payment succeeds (a pending card). */
  readonly expiresAt: Date | null;
  readonly pendingPaymentId: string | null;
}

/**
 * A new payment method of `card` for the scope's merchant: what is kept of the card (its summary,
 * its fingerprint, its number sealed), never the CVC. With the fingerprints the number may have been
 * saved under before, to find the customer's card it may already be.
 */
export function newCardPaymentMethod(
  secrets: VaultSecrets,
  scope: Scope,
  card: Omit<CardDetails, "cvc">,
  how: NewPaymentMethod,
  now: Date,
): { row: PaymentMethodRow; fingerprints: string[] } {
  const fingerprints = cardFingerprints(secrets.hasher, scope.merchantId, card.number);
  const summary = cardView(card);
  const paymentMethodId = newId("pm");
  const row = Object.assign(new PaymentMethodRow(), {
    merchantId: scope.merchantId,
    livemode: scope.livemode,
    paymentMethodId,
    customerId: how.customerId,
    paymentMethod: "card",
    paymentMethodType: null,
    cardLast4: summary.last4,
    cardBrand: summary.brand,
    cardExpMonth: card.expMonth,
    cardExpYear: card.expYear,
    cardHolderName: card.holderName ?? null,
    cardFingerprint: fingerprints.current,
    cardCiphertext: sealCardNumber(secrets.dataCipher, { ...scope, paymentMethodId }, card.number),
    billing: how.billing,
    metadata: how.metadata,
    created: now,
    updated: now,
    expiresAt: how.expiresAt,
    usedByPaymentId: null,
    pendingPaymentId: how.pendingPaymentId,
    deletedAt: null,
  } satisfies PaymentMethodRow);
  return { row, fingerprints: fingerprints.all };
}

/** Who a sealed number belongs to: a ciphertext moved to another row does not open. */
function ownerOf(row: { merchantId: string; livemode: boolean; paymentMethodId: string }): string {
  return `payment_method:${row.merchantId}:${row.livemode}:${row.paymentMethodId}`;
}

/** The card number as stored: encrypted with DATA_ENCRYPTION_KEY, bound to its payment method. */
export function sealCardNumber(
  cipher: DataCipher,
  row: { merchantId: string; livemode: boolean; paymentMethodId: string },
  number: string,
): string {
  return cipher.encrypt(number, ownerOf(row));
}

/** Where payment methods keep their sealed card numbers, for a rotation's re-encryption. */
export const sealedCardNumbers: SealedColumn = {
  table: "payment_methods",
  idColumn: "payment_method_id",
  column: "card_ciphertext",
  ownerOf: (row) => ownerOf({ merchantId: row.merchantId, livemode: row.livemode, paymentMethodId: row.id }),
};

/** The card number of a live payment method, to pay with. */
export function openCardNumber(
  cipher: DataCipher,
  row: { merchantId: string; livemode: boolean; paymentMethodId: string; cardCiphertext: string },
): string {
  return cipher.decrypt(row.cardCiphertext, ownerOf(row));
}

/** Payment methods re-fingerprinted per statement's worth of rows read. */
const refingerprintBatch = 500;

/**
 * Recomputes under the current API_KEY_HASH_SECRET the fingerprint of every live payment method
 * saved under another (`npm run rotate-secrets`, once the secret is rotated): without it, a card
 * saved before the rotation would show a fingerprint new saves of it never match, and saving it again
 * once the previous secret is gone would make a second payment method. Run after re-encryption, so
 * every number opens with the current data key; one that does not is left as it is. How many changed.
 */
export async function refingerprintCards(dataSource: DataSource, cipher: DataCipher, hasher: ApiKeyHasher): Promise<number> {
  let changed = 0;
  let after: [string, boolean, string] = ["", false, ""];
  for (;;) {
    const rows = (await dataSource.query(
      `SELECT merchant_id, livemode, payment_method_id, card_fingerprint, card_ciphertext FROM payment_methods
        WHERE card_ciphertext IS NOT NULL AND (merchant_id, livemode, payment_method_id) > ($1, $2, $3)
        ORDER BY merchant_id, livemode, payment_method_id LIMIT ${refingerprintBatch}`,
      after,
    )) as { merchant_id: string; livemode: boolean; payment_method_id: string; card_fingerprint: string; card_ciphertext: string }[];
    for (const row of rows) {
      const owner = { merchantId: row.merchant_id, livemode: row.livemode, paymentMethodId: row.payment_method_id };
      let number: string;
      try {
        number = openCardNumber(cipher, { ...owner, cardCiphertext: row.card_ciphertext });
      } catch {
        continue;
      }
      const current = cardFingerprints(hasher, row.merchant_id, number).current;
      if (current === row.card_fingerprint) continue;
      const [, updated] = (await dataSource.query(
        "UPDATE payment_methods SET card_fingerprint = $4 WHERE merchant_id = $1 AND livemode = $2 AND payment_method_id = $3 AND card_fingerprint = $5",
        [row.merchant_id, row.livemode, row.payment_method_id, current, row.card_fingerprint],
      )) as [unknown, number];
      changed += updated;
    }
    if (rows.length < refingerprintBatch) return changed;
    const last = rows[rows.length - 1]!;
    after = [last.merchant_id, last.livemode, last.payment_method_id];
  }
}
