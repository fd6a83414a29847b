import { describeValue, invalidField, missingField } from "../errors.js";

/** Amounts are integers in the smallest currency unit, 1 … 999 999 999 999 (decisions §4). */
const maxAmount = 999_999_999_999n;

/**
 * The ISO 4217 currencies in circulation, as Node's ICU knows them (fixed for a given Node version,
 * so all instances of one build agree).
 */
const currencies: ReadonlySet<string> = new Set(Intl.supportedValuesOf("currency"));

/** A required amount within the documented range. */
export function amount(field: string, value: bigint | undefined): bigint {
  if (value === undefined) throw missingField(field);
  return positiveAmount(field, value);
}

/** An amount that was sent, within the documented range. */
export function positiveAmount(field: string, value: bigint): bigint {
  if (value < 1n || value > maxAmount) {
    throw invalidField(field, `expected an integer from 1 to ${maxAmount} (smallest currency unit), got ${describeValue(value)}`);
  }
  return value;
}

/** A three-letter ISO 4217 code; lower-case input is accepted, the result is upper-case. */
export function currency(field: string, value: string | undefined): string {
  if (value === undefined || value === "") throw missingField(field);
  const code = value.toUpperCase();
  if (!/^[A-Z]{3}$/.test(code) || !currencies.has(code)) {
    throw invalidField(field, `expected a three-letter ISO 4217 currency code such as USD, got ${describeValue(value)}`);
  }
  return code;
}
