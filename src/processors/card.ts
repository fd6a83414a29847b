import { passesLuhn } from "../card-numbers.js";
import { invalidField, missingField, preconditionFailed } from "../errors.js";
import { text } from "../validation/fields.js";
import type { CardDetails } from "./processor.js";

/** Card fields as a request carries them (payment_method_data.card, payout_method_data.card). */
export interface CardFields {
  cardNumber?: string;
  cardExpMonth?: string;
  cardExpYear?: string;
  cardCvc?: string;
  cardHolderName?: string;
}

/** What of a card may be stored and shown: enough to recognise it, never enough to charge it. */
export interface CardSummary {
  last4: string;
  brand: string;
  /** Two digits, e.g. "03". */
  expMonth: string;
  /** Four digits. */
  expYear: string;
}

/** An empty string is treated as not sent: there is nothing in it to validate. */
function required(field: string, value: string | undefined): string {
  if (value === undefined || value === "") throw missingField(field);
  return value;
}

/**
 * Validates card fields from a request (errors name `<field>.card_number` etc.) and returns them
 * normalised, so that processors only ever see well-formed, unexpired cards.
 */
export function readCard(input: CardFields, field: string, now: Date): CardDetails {
  const { card, cvc } = parseCard(input, field, now, "required");
  return { ...card, cvc: cvc! };
}

/** Like readCard for a card money is sent to (a payout destination): no CVC is involved. */
export function readDestinationCard(input: CardFields, field: string, now: Date): Omit<CardDetails, "cvc"> {
  return parseCard(input, field, now, "none").card;
}

/** Like readCard for a card to save: a CVC sent is checked, and then forgotten (never stored). */
export function readSavedCard(input: CardFields, field: string, now: Date): Omit<CardDetails, "cvc"> {
  return parseCard(input, field, now, "optional").card;
}

function parseCard(
  input: CardFields,
  field: string,
  now: Date,
  cvcRule: "required" | "optional" | "none",
): { card: Omit<CardDetails, "cvc">; cvc: string | undefined } {
  const numberField = `${field}.card_number`;
  const monthField = `${field}.card_exp_month`;
  const yearField = `${field}.card_exp_year`;
  const cvcField = `${field}.card_cvc`;
  const rawNumber = required(numberField, input.cardNumber);
  const rawMonth = required(monthField, input.cardExpMonth);
  const rawYear = required(yearField, input.cardExpYear);
  const cvc =
    cvcRule === "required" ? required(cvcField, input.cardCvc) : cvcRule === "optional" && input.cardCvc !== "" ? input.cardCvc : undefined;

  // Never echo the number back: error messages end up in logs.
  const number = rawNumber.replaceAll(" ", "");
  if (!/^[0-9]{12,19}$/.test(number)) throw invalidField(numberField, "invalid card number, expected 12-19 digits");
  if (!passesLuhn(number)) throw invalidField(numberField, "invalid card number, the check digit does not match");

  const { expMonth, expYear } = readExpiry(rawMonth, rawYear, { month: monthField, year: yearField });

  if (cvc !== undefined) {
    const cvcLength = cardBrand(number) === "amex" ? 4 : 3;
    if (!new RegExp(`^[0-9]{${cvcLength}}$`).test(cvc)) throw invalidField(cvcField, `expected ${cvcLength} digits`);
  }

  const holderName = text(`${field}.card_holder_name`, input.cardHolderName, 100);

  // Checked after the format so a malformed field is reported as such, not as an expired card.
  assertNotExpired({ expMonth, expYear }, field, now);

  return { card: { number, expMonth, expYear, holderName: holderName === "" ? undefined : holderName }, cvc };
}

/** A card's expiry from a request's month and year (the fields `fields` names), the year made four digits. */
export function readExpiry(
  rawMonth: string,
  rawYear: string,
  fields: { readonly month: string; readonly year: string },
): { expMonth: number; expYear: number } {
  const expMonth = /^[0-9]{1,2}$/.test(rawMonth) ? Number(rawMonth) : 0;
  if (expMonth < 1 || expMonth > 12) throw invalidField(fields.month, `expected a month from 1 to 12 such as "03"`);
  if (!/^([0-9]{2}|[0-9]{4})$/.test(rawYear)) throw invalidField(fields.year, `expected a year such as "2030" or "30"`);
  return { expMonth, expYear: rawYear.length === 2 ? 2000 + Number(rawYear) : Number(rawYear) };
}

/** Whether a card's expiry month has ended at `now`. */
export function hasExpired(expiry: { expMonth: number; expYear: number }, now: Date): boolean {
  return expiry.expYear * 12 + expiry.expMonth < now.getUTCFullYear() * 12 + now.getUTCMonth() + 1;
}

/** Refuses (IR_16) a card whose expiry month has ended at `now`: it can pay for nothing. */
export function assertNotExpired(expiry: { expMonth: number; expYear: number }, field: string, now: Date): void {
  if (hasExpired(expiry, now)) {
    const shown = `${String(expiry.expMonth).padStart(2, "0")}/${expiry.expYear}`;
    throw preconditionFailed(`The card has expired: ${field} expired at the end of ${shown}`);
  }
}

/** Issuer identification ranges: [brand, prefix length, lowest prefix, highest prefix]. */
const brandRanges: readonly (readonly [string, number, number, number])[] = [
  ["visa", 1, 4, 4],
  ["mastercard", 2, 51, 55],
  ["mastercard", 4, 2221, 2720],
  ["amex", 2, 34, 34],
  ["amex", 2, 37, 37],
  ["discover", 4, 6011, 6011],
  ["discover", 3, 644, 649],
  ["discover", 2, 65, 65],
  ["diners", 2, 36, 36],
  ["diners", 3, 300, 305],
  ["diners", 2, 38, 39],
  ["jcb", 4, 3528, 3589],
  ["unionpay", 2, 62, 62],
];

/** The card network of a (digits-only) number, shown to callers and deciding the CVC length. */
export function cardBrand(number: string): string {
  for (const [brand, length, low, high] of brandRanges) {
    const prefix = Number(number.slice(0, length));
    if (number.length >= length && prefix >= low && prefix <= high) return brand;
  }
  return "unknown";
}

/** The storable, showable part of a card (decisions §4: never the full number or CVC). */
export function cardView(card: Omit<CardDetails, "cvc">): CardSummary {
  return {
    last4: card.number.slice(-4),
    brand: cardBrand(card.number),
    expMonth: String(card.expMonth).padStart(2, "0"),
    expYear: String(card.expYear),
  };
}
