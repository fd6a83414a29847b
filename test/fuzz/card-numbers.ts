import type { DescField } from "@bufbuild/protobuf";
import { RawJson } from "./json-text.js";

/*
 * Where card numbers travel in a request: the oracle needs every card number a request carries in
 * a card_number field, and the generators make the fields on the way to one usually present.
 */

/** Keys whose values are card numbers in the REST dialect and in proto JSON. */
const cardNumberKeys = new Set(["card_number", "cardNumber"]);

/** A card number as the leak check tracks it: shorter digit strings occur in ordinary responses. */
const trackedCardNumber = /^\d{12,19}$/;

/** The card numbers a request body carries in card_number fields, at any depth. */
export function cardNumbersIn(tree: unknown, found: string[] = []): string[] {
  if (Array.isArray(tree)) {
    for (const item of tree) cardNumbersIn(item, found);
  } else if (typeof tree === "object" && tree !== null && !(tree instanceof RawJson) && !ArrayBuffer.isView(tree)) {
    for (const [key, value] of Object.entries(tree)) {
      if (cardNumberKeys.has(key) && typeof value === "string" && trackedCardNumber.test(value)) found.push(value);
      else cardNumbersIn(value, found);
    }
  }
  return found;
}

const leadsToCard = new WeakMap<DescField, boolean>();

/**
 * How often a field is present in a generated message, as fast-check's option `freq` (absent one
 * time in `freq`): a field on the way to a card_number is present most of the time, so the card
 * leak check has card numbers to look for; any other field half of the time.
 */
export function presenceFreq(field: DescField): number {
  return leadsToCardNumber(field) ? 6 : 2;
}

function leadsToCardNumber(field: DescField, seen = new Set<DescField>()): boolean {
  const known = leadsToCard.get(field);
  if (known !== undefined) return known;
  if (seen.has(field)) return false;
  seen.add(field);
  const leads = field.name === "card_number" || (field.message?.fields.some((f) => leadsToCardNumber(f, seen)) ?? false);
  leadsToCard.set(field, leads);
  return leads;
}
