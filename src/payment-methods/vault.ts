import type { ApiKeyHasher } from "../auth/api-key-secret.js";
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
