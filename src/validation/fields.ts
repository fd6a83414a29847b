import { describeValue, invalidField } from "../errors.js";
import { countryCodes } from "./iso3166.js";

/*
 * Field checks shared by every resource. Each takes the documented field name so the error names
 * it, and returns the normalised value. `undefined` (not sent) passes through untouched.
 */

/** Free text with an upper bound, so no field can grow a row without limit. */
export function text(field: string, value: string | undefined, maxLength = 1000): string | undefined {
  if (value !== undefined && value.length > maxLength) {
    throw invalidField(field, `at most ${maxLength} characters`);
  }
  return value;
}

/** An e-mail address (a pragmatic check: one @, a dot in the domain, no spaces). */
export function email(field: string, value: string | undefined): string | undefined {
  if (value !== undefined && (value.length > 254 || !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(value))) {
    throw invalidField(field, "expected an e-mail address such as jane@example.com");
  }
  return value;
}

/** A two-letter ISO 3166-1 country code; lower-case input is accepted and upper-cased. */
export function country(field: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const code = value.toUpperCase();
  if (!countryCodes.has(code)) {
    throw invalidField(field, `expected a two-letter ISO 3166-1 country code such as GB, got ${describeValue(value)}`);
  }
  return code;
}

/** A phone country calling code: a plus sign and 1–4 digits, e.g. +44. */
export function phoneCountryCode(field: string, value: string | undefined): string | undefined {
  if (value !== undefined && !/^\+[1-9]\d{0,3}$/.test(value)) {
    throw invalidField(field, `expected a plus sign and 1-4 digits such as +44, got ${describeValue(value)}`);
  }
  return value;
}

/** A phone number without its country code: digits, spaces and the usual separators. */
export function phone(field: string, value: string | undefined): string | undefined {
  if (value !== undefined && !/^[0-9 ()./-]{4,20}$/.test(value)) {
    throw invalidField(field, "expected 4-20 digits (spaces, dots, dashes and parentheses allowed)");
  }
  return value;
}

/** An absolute http(s) URL, for redirects and webhooks. */
export function url(field: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  let parsed: URL | undefined;
  try {
    parsed = new URL(value);
  } catch {
    parsed = undefined;
  }
  if (parsed === undefined || (parsed.protocol !== "http:" && parsed.protocol !== "https:") || value.length > 2048) {
    throw invalidField(field, "expected an absolute http or https URL");
  }
  return value;
}

/**
 * Update semantics for an optional text field: not sent keeps the current value (undefined), ""
 * clears it (null), anything else is checked by `check`.
 */
export function change<T>(value: string | undefined, check: (value: string) => T): T | null | undefined {
  if (value === undefined) return undefined;
  return value === "" ? null : check(value);
}

/** An integer that was sent, within `minimum` … `maximum` inclusive (IR_05 otherwise). */
export function bounded<T extends number | bigint>(field: string, value: T | undefined, minimum: T, maximum: T): T | undefined {
  if (value !== undefined && (value < minimum || value > maximum)) {
    throw invalidField(field, `expected an integer from ${minimum} to ${maximum}, got ${describeValue(value)}`);
  }
  return value;
}
