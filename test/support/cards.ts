import type { JsonObject } from "@bufbuild/protobuf";

/** Card fields of the 4242 test card with a fixed far-off expiry, for suites whose clock never moves years ahead. */
export const visaCard = { card_number: "4242424242424242", card_exp_month: "12", card_exp_year: "2035", card_cvc: "123" } as const;

/**
 * payment_method_data with a test card that expires three years after `now` (the service's clock)
 * and the CVC length its brand takes; an override of undefined leaves the field out, as a caller who
 * forgot it would.
 */
export function cardData(number: string, now: Date, overrides: Record<string, string | undefined> = {}): JsonObject {
  const fields: Record<string, string | undefined> = {
    card_number: number,
    card_exp_month: "12",
    card_exp_year: String(now.getUTCFullYear() + 3),
    card_cvc: number.startsWith("34") || number.startsWith("37") ? "1234" : "123",
    ...overrides,
  };
  return { card: Object.fromEntries(Object.entries(fields).filter((entry): entry is [string, string] => entry[1] !== undefined)) };
}
