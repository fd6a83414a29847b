import * as fc from "fast-check";
import type { Fixtures } from "./fixtures.js";
import { RawJson, type JsonTree } from "./json-text.js";

/*
 * Leaf values of every protocol's requests: plausible ones, chosen by field name so that requests
 * get past validation and reach the database, the processor and the state machines, and hostile
 * ones that probe parsers, the database and the log.
 */

/**
 * Card numbers for card_number fields: the sandbox test cards and random numbers, all starting with
 * 4, so they never equal a misplacedCardNumber and any echo of them is a leak.
 */
const cardNumberForCardField: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "4242424242424242",
      "4000000000003220",
      "4000000000000259",
      "4000000000000002",
      "4000000000009995",
      "4012888888881881",
    ),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.integer({ min: 11, max: 18 }), fc.bigInt({ min: 0n, max: 10n ** 18n - 1n }))
      .map(([digits, random]) => `4${random.toString().padStart(18, "0").slice(0, digits)}`),
  },
);

/**
 * Card numbers for every other field (descriptions, metadata, ids): Luhn-valid, but starting with
 * 3, 5 or 6, so a legitimate echo of them is never mistaken for a leak of a card_number value.
 */
export const misplacedCardNumber: fc.Arbitrary<string> = fc.constantFrom(
  "5555555555554444",
  "5105105105105100",
  "378282246310005",
  "6011111111111117",
  "3566002020360505",
);

const base62 = fc.constantFrom(..."0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".split(""));

/** An id in the service's format (`pay_` + 24 base62 characters) that no object has. */
export function unknownId(prefix: string): fc.Arbitrary<string> {
  return fc.string({ unit: base62, minLength: 24, maxLength: 24 }).map((random) => `${prefix}_${random}`);
}

/** A long string, built by repetition so that generating and shrinking it costs nothing. */
export function longText(min: number, max: number): fc.Arbitrary<string> {
  return fc
    .tuple(fc.integer({ min, max }), fc.constantFrom("x", "é", "💳", "\u0000", "a b", "\\"))
    .map(([length, unit]) => unit.repeat(Math.ceil(length / unit.length)));
}

/** Strings that have broken parsers, databases and loggers before; long ones are rarer, as they cost both sides time. */
export const hostileText: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.constantFrom(
      "",
      " ",
      "\u0000",
      "a\u0000b",
      "\ud800",
      "x\udc00y",
      "\udbff\udfff",
      "\u202e",
      "\ufeff",
      "\r\n",
      "\u0085",
      "' OR 1=1 --",
      "%s%n%x",
      "../../../etc/passwd",
      "<script>alert(1)</script>",
      "null",
      "NaN",
      "١٢٣",
      "Ωmega",
      "🙂",
      "0".repeat(64),
    ),
  },
  { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength: 40 }) },
  { weight: 2, arbitrary: fc.string({ unit: "binary-ascii", maxLength: 40 }) },
  { weight: 1, arbitrary: longText(1_000, 10_000) },
  { weight: 1, arbitrary: longText(10_000, 200_000) },
);

/** Numbers that are not acceptable amounts or counts, some beyond what a double can hold. */
export const hostileNumber: fc.Arbitrary<JsonTree> = fc.constantFrom<JsonTree>(
  1.5,
  -1,
  0,
  0.1,
  1e300,
  -1e300,
  2147483648,
  -2147483649,
  4294967296,
  Number.MAX_SAFE_INTEGER,
  1e21,
  new RawJson("9007199254740993"),
  new RawJson("-9007199254740993"),
  new RawJson("18446744073709551616"),
  new RawJson("1e400"),
  new RawJson("-0"),
  new RawJson("1E2"),
  new RawJson("0.0000000000000000000001"),
);

/** JSON nested thousands of levels deep, written verbatim (no recursion on either side of the generator). */
export const deeplyNested: fc.Arbitrary<RawJson> = fc.oneof(
  fc.integer({ min: 1_000, max: 50_000 }).map((depth) => new RawJson("[".repeat(depth) + "]".repeat(depth))),
  fc.integer({ min: 1_000, max: 20_000 }).map((depth) => new RawJson(`${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`)),
);

/** Timestamps near the service's clock, in the REST dialect's ISO 8601 form. */
export const plausibleTimestamp: fc.Arbitrary<string> = fc
  .tuple(fc.integer({ min: -30 * 86_400, max: 30 * 86_400 }), fc.constantFrom("Z", "+02:00", ".000Z"))
  .map(([offsetSeconds, zone]) => {
    const iso = new Date(Date.now() + offsetSeconds * 1000).toISOString();
    return zone === ".000Z" ? iso : iso.slice(0, 19) + zone;
  });

/** Timestamps a parser may choke on. */
export const hostileTimestamp: fc.Arbitrary<string> = fc.constantFrom(
  "2026-02-30T00:00:00Z",
  "0000-01-01T00:00:00Z",
  "9999-12-31T23:59:59.999999999Z",
  "+275760-09-13T00:00:00.001Z",
  "2026-01-01",
  "2026-01-01T00:00:00",
  "1970-01-01T00:00:00+25:00",
  "yesterday",
  "1735689600",
);

/**
 * Plausible values by field name, built from the fixtures so that ids name real objects of the
 * right kind and keys and secrets are real.
 */
export class FieldValues {
  private readonly texts = new Map<string, fc.Arbitrary<string>>();

  constructor(readonly fixtures: Fixtures) {
    const { ids } = fixtures;
    const realOr = (real: readonly string[], prefix: string) =>
      fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...real) }, { weight: 1, arbitrary: unknownId(prefix) });
    const table: Record<string, fc.Arbitrary<string>> = {
      currency: fc.constantFrom("USD", "USD", "EUR", "GBP", "usd", "JPY", "CAD", "AUD", "XXX", "US"),
      payment_id: realOr(ids.payment, "pay"),
      customer_id: realOr(ids.customer, "cus"),
      profile_id: realOr(ids.profile, "pro"),
      merchant_id: realOr(ids.merchant, "mer"),
      refund_id: realOr(ids.refund, "ref"),
      payout_id: realOr(ids.payout, "po"),
      dispute_id: realOr(ids.dispute, "dis"),
      payment_method_id: realOr(ids.paymentMethod, "pm"),
      mandate_id: realOr(ids.mandate, "man"),
      key_id: realOr(ids.apiKey, "key"),
      balance_transaction_id: realOr(ids.balanceTransaction, "txn"),
      // What moved the money: the fixtures that may have (a payment never captured moved none).
      source_id: realOr([...ids.payment, ...ids.refund, ...ids.dispute, ...ids.payout], "pay"),
      event_id: unknownId("evt"),
      object_id: fc.constantFrom(
        ...ids.payment,
        ...ids.refund,
        ...ids.payout,
        ...ids.dispute,
        ...ids.customer,
        ...ids.paymentMethod,
        ...ids.mandate,
      ),
      client_secret: fc.oneof(fc.constantFrom(...fixtures.clientSecrets), unknownId("pay_secret")),
      email: fc.constantFrom("jane@example.com", "a@b.co", "not-an-email", "jane@example.com "),
      card_number: cardNumberForCardField,
      card_exp_month: fc.constantFrom("12", "12", "01", "1", "13", "00"),
      card_exp_year: fc.constantFrom("2030", "2030", "2020", "30", "2999"),
      card_cvc: fc.constantFrom("123", "123", "1234", "12"),
      phone: fc.constantFrom("7700900123", "(555) 123-4567", "12"),
      phone_country_code: fc.constantFrom("+44", "+1", "44", "+12345"),
      country: fc.constantFrom("GB", "US", "gb", "DE", "XX"),
      line1: fc.constant("1 High St"),
      city: fc.constantFrom("London", "Zürich"),
      postal_code: fc.constant("N1 1AA"),
      return_url: fc.constantFrom("https://shop.example/return", "http://localhost:3000/done", "ftp://shop.example", "javascript:alert(1)"),
      webhook_url: fc.constantFrom("https://shop.example/hooks", "not a url"),
      bank_account_number: fc.constantFrom("000123456789", "000111111116", "000222222227", "000333333335", "1"),
      bank_routing_number: fc.constantFrom("110000000", "021000021", "1"),
      processor: fc.constantFrom("sandbox_instant", "sandbox_card", "sandbox_ach", "sandbox_swift", "nope"),
      payment_method_type: fc.constantFrom("credit", "debit"),
      ip_address: fc.constantFrom("203.0.113.7", "::1", "999.1.1.1"),
      user_agent: fc.constant("Mozilla/5.0"),
      type: fc.constantFrom("payment.succeeded", "refund.pending", "nothing"),
      cancellation_reason: fc.constantFrom("duplicate", "requested_by_customer"),
    };
    for (const [name, arbitrary] of Object.entries(table)) this.texts.set(name, arbitrary);
  }

  /** A plausible string for a field, by its snake_case name. */
  text(fieldName: string): fc.Arbitrary<string> {
    let arbitrary = this.texts.get(fieldName);
    if (arbitrary === undefined) {
      arbitrary = fieldName.endsWith("_url")
        ? this.texts.get("return_url")!
        : fieldName.endsWith("name")
          ? fc.constantFrom("Jane Doe", "Acme", "Sandbox Bank")
          : fieldName.endsWith("_id")
            ? unknownId(fieldName.slice(0, 3))
            : fc.oneof(fc.constantFrom("Order 42", "ok", "Receipt #42"), fc.string({ maxLength: 20 }));
      this.texts.set(fieldName, arbitrary);
    }
    return arbitrary;
  }

  /** A plausible integer for a field: amounts, list limits and offsets, clock seconds. */
  integer(fieldName: string): fc.Arbitrary<number> {
    if (fieldName.startsWith("amount")) return fc.oneof(fc.integer({ min: 1, max: 1_000_000 }), fc.constantFrom(1000, 300));
    if (fieldName === "limit") return fc.integer({ min: 1, max: 100 });
    if (fieldName === "offset") return fc.integer({ min: 0, max: 20 });
    if (fieldName === "seconds") return fc.integer({ min: 1, max: 691_200 });
    return fc.integer({ min: 0, max: 100 });
  }

  /** Metadata keys: a few real ones and some beyond the documented 1–40 characters. */
  readonly metadataKey: fc.Arbitrary<string> = fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom("order", "tier", "crm_id", "batch") },
    { weight: 1, arbitrary: fc.constantFrom("", "k".repeat(41), "a.b", "__proto__", "constructor") },
    { weight: 1, arbitrary: fc.string({ maxLength: 8 }) },
  );
}
