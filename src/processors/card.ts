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
  const { card, cvc } = parseCard(input, field, now, true);
  return { ...card, cvc: cvc! };
}

/** Like readCard for a card money is sent to (a payout destination): no CVC is involved. */
export function readDestinationCard(input: CardFields, field: string, now: Date): Omit<CardDetails, "cvc"> {
  return parseCard(input, field, now, false).card;
}

function parseCard(
  input: CardFields,
  field: string,
  now: Date,
  withCvc: boolean,
): { card: Omit<CardDetails, "cvc">; cvc: string | undefined } {
  const numberField = `${field}.card_number`;
  const monthField = `${field}.card_exp_month`;
  const yearField = `${field}.card_exp_year`;
  const cvcField = `${field}.card_cvc`;
  const rawNumber = required(numberField, input.cardNumber);
  const rawMonth = required(monthField, input.cardExpMonth);
  const rawYear = required(yearField, input.cardExpYear);
  const cvc = withCvc ? required(cvcField, input.cardCvc) : undefined;

  // Never echo the number back: error messages end up in logs.
  const number = rawNumber.replaceAll(" ", "");
  if (!/^[0-9]{12,19}$/.test(number)) throw invalidField(numberField, "invalid card number, expected 12-19 digits");
  if (!passesLuhn(number)) throw invalidField(numberField, "invalid card number, the check digit does not match");

  const expMonth = /^[0-9]{1,2}$/.test(rawMonth) ? Number(rawMonth) : 0;
  if (expMonth < 1 || expMonth > 12) throw invalidField(monthField, `expected a month from 1 to 12 such as "03"`);

  if (!/^([0-9]{2}|[0-9]{4})$/.test(rawYear)) throw invalidField(yearField, `expected a year such as "2030" or "30"`);
  const expYear = rawYear.length === 2 ? 2000 + Number(rawYear) : Number(rawYear);

  if (cvc !== undefined) {
    const cvcLength = cardBrand(number) === "amex" ? 4 : 3;
    if (!new RegExp(`^[0-9]{${cvcLength}}$`).test(cvc)) throw invalidField(cvcField, `expected ${cvcLength} digits`);
  }

  const holderName = text(`${field}.card_holder_name`, input.cardHolderName, 100);

  // Checked after the format so a malformed field is reported as such, not as an expired card.
  const currentMonths = now.getUTCFullYear() * 12 + now.getUTCMonth() + 1;
  if (expYear * 12 + expMonth < currentMonths) {
    const expiry = `${String(expMonth).padStart(2, "0")}/${expYear}`;
    throw preconditionFailed(`The card has expired: ${field} expired at the end of ${expiry}`);
  }

  return { card: { number, expMonth, expYear, holderName: holderName === "" ? undefined : holderName }, cvc };
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
function cardBrand(number: string): string {
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
