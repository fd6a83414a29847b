import { create, equals, fromJson, ScalarType, type DescMessage, type JsonValue, type Message } from "@bufbuild/protobuf";
import { reflect, type ReflectList, type ReflectMap, type ReflectMessage } from "@bufbuild/protobuf/reflect";
import { StructSchema, TimestampSchema, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { ApiKeyService } from "../../gen/paymentservice/v1/api_key_pb.js";
import { Environment } from "../../gen/paymentservice/v1/common_pb.js";
import { CreateCustomerRequestSchema, CustomerSchema, CustomerService } from "../../gen/paymentservice/v1/customer_pb.js";
import { BalanceService } from "../../gen/paymentservice/v1/balance_pb.js";
import { DisputeService } from "../../gen/paymentservice/v1/dispute_pb.js";
import { EventSchema, EventService } from "../../gen/paymentservice/v1/event_pb.js";
import { HealthService } from "../../gen/paymentservice/v1/health_pb.js";
import { MandateService } from "../../gen/paymentservice/v1/mandate_pb.js";
import { MerchantService } from "../../gen/paymentservice/v1/merchant_pb.js";
import {
  AcceptanceType,
  CaptureMethod,
  CreatePaymentRequestSchema,
  ListPaymentsRequestSchema,
  type CreatePaymentRequest,
  type Payment,
  NextActionType,
  PaymentMethod,
  PaymentSchema,
  PaymentService,
  PaymentStatus,
} from "../../gen/paymentservice/v1/payment_pb.js";
import { PaymentMethodService } from "../../gen/paymentservice/v1/payment_method_pb.js";
import { PayoutService } from "../../gen/paymentservice/v1/payout_pb.js";
import { RefundService } from "../../gen/paymentservice/v1/refund_pb.js";
import { SandboxService } from "../../gen/paymentservice/v1/sandbox_pb.js";
import { ApiError } from "../errors.js";
import { readMessage, writeMessage } from "./codec.js";

/*
 * The REST dialect (docs/api-conventions.md, "REST dialect"): snake_case keys, int64 as JSON
 * numbers, enums as lower-case words, ISO 8601 UTC timestamps, null for an absent optional value
 * (every key always present), unknown keys IR_06 and unknown enum words IR_05, both naming the field,
 * and the text rule (no NUL, no unpaired surrogate: IR_06 naming the field).
 */

/** The refusal of reading `json` as a `schema` message, as [code, message], or undefined when it reads. */
function refusal(schema: DescMessage, json: unknown): [string, string] | undefined {
  try {
    readMessage(schema, json);
    return undefined;
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    return [error.code, error.message];
  }
}

/** 2026-01-31T12:00:00Z in seconds. */
const noonSeconds = 1_769_860_800n;

describe("writeMessage", () => {
  it("writes a payment in the dialect: snake_case, numbers, words, ISO UTC, null for what is unset", () => {
    const payment = create(PaymentSchema, {
      paymentId: "pay_1",
      merchantId: "mer_1",
      profileId: "pro_1",
      status: PaymentStatus.REQUIRES_ACTION,
      amount: 1234n,
      amountCapturable: 0n,
      currency: "EUR",
      captureMethod: CaptureMethod.MANUAL,
      paymentMethod: PaymentMethod.CARD,
      paymentMethodData: { card: { last4: "4242", brand: "visa", expMonth: "03", expYear: "2030" } },
      nextAction: { type: NextActionType.REDIRECT_TO_URL, redirectToUrl: "https://example.com/3ds" },
      metadata: { order: "42" },
      created: { seconds: noonSeconds, nanos: 250_000_000 },
    });
    expect(writeMessage(payment, PaymentSchema)).toEqual({
      payment_id: "pay_1",
      merchant_id: "mer_1",
      profile_id: "pro_1",
      status: "requires_action",
      amount: 1234,
      amount_received: null,
      amount_capturable: 0,
      currency: "EUR",
      capture_method: "manual",
      capture_on: null,
      payment_method: "card",
      payment_method_type: null,
      payment_method_data: { card: { last4: "4242", brand: "visa", exp_month: "03", exp_year: "2030" } },
      customer_id: null,
      email: null,
      description: null,
      statement_descriptor: null,
      client_secret: null,
      return_url: null,
      next_action: { type: "redirect_to_url", redirect_to_url: "https://example.com/3ds" },
      error_code: null,
      error_message: null,
      cancellation_reason: null,
      metadata: { order: "42" },
      created: "2026-01-31T12:00:00.250Z",
      modified_at: null,
      payment_method_id: null,
      setup_future_usage: null,
      off_session: false,
      mandate_id: null,
    });
  });

  it.each([
    ["an implicit string", "currency", ""],
    ["an implicit int64", "amount_capturable", 0],
    ["an optional string", "customer_id", null],
    ["an optional int64", "amount_received", null],
    ["an enum at its zero value", "status", null],
    ["an optional enum", "payment_method", null],
    ["a message", "next_action", null],
    ["a timestamp", "created", null],
    ["a map", "metadata", {}],
  ])("an empty payment still has every key: %s (%s) is %j", (_, key, value) => {
    const json = writeMessage(create(PaymentSchema), PaymentSchema);
    expect(Object.keys(json)).toEqual(PaymentSchema.fields.map((f) => f.name));
    expect(json[key]).toEqual(value);
  });

  it("writes an optional value that is set, even to its zero value", () => {
    expect(writeMessage(create(PaymentSchema, { amountReceived: 0n, customerId: "" }), PaymentSchema)).toMatchObject({
      amount_received: 0,
      customer_id: "",
    });
  });

  it.each([
    ["to the millisecond", { seconds: noonSeconds, nanos: 123_456_789 }, "2026-01-31T12:00:00.123Z"],
    ["with zero milliseconds shown", { seconds: noonSeconds, nanos: 0 }, "2026-01-31T12:00:00.000Z"],
    ["before 1970", { seconds: -1n, nanos: 0 }, "1969-12-31T23:59:59.000Z"],
  ])("writes a timestamp in UTC %s", (_, created, iso) => {
    expect(writeMessage(create(PaymentSchema, { created }), PaymentSchema).created).toBe(iso);
  });

  it.each([
    ["2^53 - 1", 9_007_199_254_740_991n, 9_007_199_254_740_991],
    ["-(2^53 - 1)", -9_007_199_254_740_991n, -9_007_199_254_740_991],
  ])("writes the int64 %s as an exact JSON number", (_, amount, number) => {
    expect(writeMessage(create(PaymentSchema, { amount }), PaymentSchema).amount).toBe(number);
  });

  it.each([
    ["2^53", 9_007_199_254_740_992n],
    ["-(2^53)", -9_007_199_254_740_992n],
  ])("refuses to write the int64 %s, which JSON numbers cannot hold exactly: a server bug, not a rounded amount", (_, amount) => {
    expect(() => writeMessage(create(PaymentSchema, { amount }), PaymentSchema)).toThrow(`int64 value ${amount} is not a safe JSON number`);
  });

  it("writes a Struct as the JSON it holds", () => {
    const object = { payment_id: "pay_1", amount: 5, paid: true, refunds: [], note: null, card: { last4: "4242" } };
    const event = create(EventSchema, { eventId: "evt_1", type: "payment.succeeded", data: { object } });
    expect(writeMessage(event, EventSchema)).toEqual({
      event_id: "evt_1",
      type: "payment.succeeded",
      created: null,
      data: { object },
      delivery: null,
    });
  });

  it("reads a ReflectMessage without a schema", () => {
    expect(writeMessage(reflect(CustomerSchema, create(CustomerSchema, { customerId: "cus_1" })))).toMatchObject({
      customer_id: "cus_1",
      address: null,
    });
  });
});

describe("readMessage", () => {
  it("reads a request in the dialect", () => {
    const json = {
      amount: 1000,
      currency: "eur",
      profile_id: "pro_1",
      confirm: true,
      capture_method: "scheduled",
      capture_on: "2026-01-31T13:00:00+01:00",
      payment_method: "card",
      payment_method_data: { card: { card_number: "4242424242424242", card_exp_month: "03", card_exp_year: "2030", card_cvc: "123" } },
      customer_acceptance: { acceptance_type: "online", accepted_at: "2026-01-31T12:00:00.5Z", online: { ip_address: "192.0.2.1" } },
      metadata: { order: "42", empty: "" },
    };
    expect(readMessage(CreatePaymentRequestSchema, json).message).toEqual(
      create(CreatePaymentRequestSchema, {
        amount: 1000n,
        currency: "eur",
        profileId: "pro_1",
        confirm: true,
        captureMethod: CaptureMethod.SCHEDULED,
        captureOn: { seconds: noonSeconds },
        paymentMethod: PaymentMethod.CARD,
        paymentMethodData: { card: { cardNumber: "4242424242424242", cardExpMonth: "03", cardExpYear: "2030", cardCvc: "123" } },
        customerAcceptance: {
          acceptanceType: AcceptanceType.ONLINE,
          acceptedAt: { seconds: noonSeconds, nanos: 500_000_000 },
          online: { ipAddress: "192.0.2.1" },
        },
        metadata: { order: "42", empty: "" },
      }),
    );
  });

  it("reads null as absent, at any depth", () => {
    const json = {
      amount: null,
      capture_on: null,
      metadata: null,
      payment_method_data: null,
      customer_acceptance: { online: null, accepted_at: null },
    };
    expect(readMessage(CreatePaymentRequestSchema, json).message).toEqual(create(CreatePaymentRequestSchema, { customerAcceptance: {} }));
  });

  it.each([
    ["zero", 0, 0n],
    ["a negative amount (its range is the handler's rule)", -5, -5n],
    ["2^53 - 1", 9_007_199_254_740_991, 9_007_199_254_740_991n],
    ["an integral float", 10.0, 10n],
  ])("reads the int64 %s", (_, amount, expected) => {
    expect(readMessage(CreatePaymentRequestSchema, { amount }).message).toMatchObject({ amount: expected });
  });

  it.each([
    ["with Z", "2026-01-31T12:00:00Z", noonSeconds, 0],
    ["with an offset", "2026-01-31T07:00:00-05:00", noonSeconds, 0],
    ["without seconds", "2026-01-31T12:00Z", noonSeconds, 0],
    ["with milliseconds", "2026-01-31T12:00:00.001Z", noonSeconds, 1_000_000],
    ["with nanoseconds", "2026-01-31T12:00:00.000000007Z", noonSeconds, 7],
    ["with an offset across midnight", "2026-02-01T00:30:00+12:30", noonSeconds, 0],
    ["on February 29th of a leap year", "2028-02-29T12:00:00Z", 1_835_438_400n, 0],
  ])("reads a timestamp %s", (_, captureOn, seconds, nanos) => {
    expect((readMessage(CreatePaymentRequestSchema, { capture_on: captureOn }).message as CreatePaymentRequest).captureOn).toEqual(
      create(TimestampSchema, { seconds, nanos }),
    );
  });

  it("names nothing it was not sent: only the body's keys are set", () => {
    expect(readMessage(CreateCustomerRequestSchema, { name: "Jane" }).message).toEqual(
      create(CreateCustomerRequestSchema, { name: "Jane" }),
    );
  });

  it.each([
    // The body as a whole.
    ["a body that is an array", CreatePaymentRequestSchema, [], "IR_06", "The request body must be a JSON object"],
    ["a body that is a string", CreatePaymentRequestSchema, "amount=5", "IR_06", "The request body must be a JSON object"],
    ["a body that is null", CreatePaymentRequestSchema, null, "IR_06", "The request body must be a JSON object"],
    // Unknown keys: IR_06 naming the key by its path.
    ["an unknown key", CreatePaymentRequestSchema, { amout: 5 }, "IR_06", "Unknown field: amout"],
    [
      "a camelCase key (proto JSON's, not the dialect's)",
      CreatePaymentRequestSchema,
      { profileId: "pro_1" },
      "IR_06",
      "Unknown field: profileId",
    ],
    [
      "an unknown nested key",
      CreatePaymentRequestSchema,
      { payment_method_data: { card: { number: "x" } } },
      "IR_06",
      "Unknown field: payment_method_data.card.number",
    ],
    [
      "an unknown key inside an address",
      CreateCustomerRequestSchema,
      { address: { town: "Paris" } },
      "IR_06",
      "Unknown field: address.town",
    ],
    ["an unknown key holding null", CreatePaymentRequestSchema, { amout: null }, "IR_06", "Unknown field: amout"],
    // Enums: IR_05 naming the field and listing the words.
    [
      "an enum word in upper case",
      CreatePaymentRequestSchema,
      { capture_method: "MANUAL" },
      "IR_05",
      'Invalid value for field capture_method: expected one of automatic, manual, scheduled, got "MANUAL"',
    ],
    [
      "an enum by its proto name",
      CreatePaymentRequestSchema,
      { capture_method: "CAPTURE_METHOD_MANUAL" },
      "IR_05",
      'Invalid value for field capture_method: expected one of automatic, manual, scheduled, got "CAPTURE_METHOD_MANUAL"',
    ],
    [
      "an enum by its number",
      CreatePaymentRequestSchema,
      { capture_method: 2 },
      "IR_05",
      "Invalid value for field capture_method: expected one of automatic, manual, scheduled, got 2",
    ],
    [
      "the unspecified enum value",
      CreatePaymentRequestSchema,
      { capture_method: "unspecified" },
      "IR_05",
      'Invalid value for field capture_method: expected one of automatic, manual, scheduled, got "unspecified"',
    ],
    [
      "an enum word nested",
      CreatePaymentRequestSchema,
      { customer_acceptance: { acceptance_type: "Online" } },
      "IR_05",
      'Invalid value for field customer_acceptance.acceptance_type: expected one of online, offline, got "Online"',
    ],
    // int64 amounts: JSON numbers, integral and exact.
    [
      "an amount as a string",
      CreatePaymentRequestSchema,
      { amount: "1000" },
      "IR_05",
      "Invalid value for field amount: expected an integer, got a string",
    ],
    [
      "a fractional amount",
      CreatePaymentRequestSchema,
      { amount: 10.5 },
      "IR_05",
      "Invalid value for field amount: expected an integer, got 10.5",
    ],
    [
      "an amount of 2^53",
      CreatePaymentRequestSchema,
      { amount: 9_007_199_254_740_992 },
      "IR_05",
      "Invalid value for field amount: the integer is out of range",
    ],
    [
      "an amount of -(2^53)",
      CreatePaymentRequestSchema,
      { amount: -9_007_199_254_740_992 },
      "IR_05",
      "Invalid value for field amount: the integer is out of range",
    ],
    [
      "an amount that is a bool",
      CreatePaymentRequestSchema,
      { amount: true },
      "IR_05",
      "Invalid value for field amount: expected an integer, got true",
    ],
    // A list's limit declares IR_06 for any bad value; other integers are IR_05.
    [
      "a limit that is a string",
      ListPaymentsRequestSchema,
      { limit: "ten" },
      "IR_06",
      'Invalid value for field limit: expected an integer, got "ten"',
    ],
    [
      "a fractional limit",
      ListPaymentsRequestSchema,
      { limit: 0.5 },
      "IR_06",
      "Invalid value for field limit: expected an integer, got 0.5",
    ],
    [
      "a limit beyond int32",
      ListPaymentsRequestSchema,
      { limit: 2 ** 31 },
      "IR_06",
      "Invalid value for field limit: the integer is out of range",
    ],
    [
      "an offset that is a string",
      ListPaymentsRequestSchema,
      { offset: "ten" },
      "IR_05",
      'Invalid value for field offset: expected an integer, got "ten"',
    ],
    // Timestamps: ISO 8601 with a date, a time and a zone.
    [
      "a date without a time",
      CreatePaymentRequestSchema,
      { capture_on: "2026-01-31" },
      "IR_05",
      "Invalid value for field capture_on: expected an ISO 8601 timestamp such as 2026-01-31T12:00:00Z, got a string",
    ],
    [
      "a time without a zone",
      CreatePaymentRequestSchema,
      { capture_on: "2026-01-31T12:00:00" },
      "IR_05",
      "Invalid value for field capture_on: expected an ISO 8601 timestamp",
    ],
    [
      "a timestamp in epoch seconds",
      CreatePaymentRequestSchema,
      { capture_on: 1_769_860_800 },
      "IR_05",
      "Invalid value for field capture_on: expected an ISO 8601 timestamp such as 2026-01-31T12:00:00Z, got a number",
    ],
    ["a month 13", CreatePaymentRequestSchema, { capture_on: "2026-13-01T00:00:00Z" }, "IR_05", "Invalid value for field capture_on"],
    ["a second 60", CreatePaymentRequestSchema, { capture_on: "2026-01-31T12:00:60Z" }, "IR_05", "Invalid value for field capture_on"],
    ["February 30th", CreatePaymentRequestSchema, { capture_on: "2026-02-30T00:00:00Z" }, "IR_05", "Invalid value for field capture_on"],
    [
      "February 29th of a common year",
      CreatePaymentRequestSchema,
      { capture_on: "2026-02-29T00:00:00Z" },
      "IR_05",
      "Invalid value for field capture_on",
    ],
    ["April 31st", CreatePaymentRequestSchema, { capture_on: "2026-04-31T12:00:00Z" }, "IR_05", "Invalid value for field capture_on"],
    ["hour 24", CreatePaymentRequestSchema, { capture_on: "2026-01-31T24:00:00Z" }, "IR_05", "Invalid value for field capture_on"],
    [
      "an offset of 24 hours",
      CreatePaymentRequestSchema,
      { capture_on: "2026-01-31T12:00:00+24:00" },
      "IR_05",
      "Invalid value for field capture_on",
    ],
    [
      "a timestamp as an object",
      CreatePaymentRequestSchema,
      { capture_on: { seconds: 1 } },
      "IR_05",
      "Invalid value for field capture_on: expected an ISO 8601 timestamp such as 2026-01-31T12:00:00Z, got an object",
    ],
    [
      "a nested timestamp",
      CreatePaymentRequestSchema,
      { customer_acceptance: { accepted_at: "yesterday" } },
      "IR_05",
      'Invalid value for field customer_acceptance.accepted_at: expected an ISO 8601 timestamp such as 2026-01-31T12:00:00Z, got "yesterday"',
    ],
    // Other JSON types.
    [
      "a bool as a string",
      CreatePaymentRequestSchema,
      { confirm: "true" },
      "IR_05",
      'Invalid value for field confirm: expected true or false, got "true"',
    ],
    [
      "a string as a number",
      CreatePaymentRequestSchema,
      { currency: 978 },
      "IR_05",
      "Invalid value for field currency: expected a string, got a number",
    ],
    [
      "a message as a string",
      CreatePaymentRequestSchema,
      { payment_method_data: "card" },
      "IR_05",
      'Invalid value for field payment_method_data: expected an object, got "card"',
    ],
    [
      "a message as an array",
      CreatePaymentRequestSchema,
      { customer_acceptance: [] },
      "IR_05",
      "Invalid value for field customer_acceptance: expected an object, got an array",
    ],
    [
      "a map as an array",
      CreatePaymentRequestSchema,
      { metadata: [] },
      "IR_05",
      "Invalid value for field metadata: expected an object, got an array",
    ],
    [
      "a map value that is a number",
      CreatePaymentRequestSchema,
      { metadata: { order: 42 } },
      "IR_05",
      "Invalid value for field metadata.order: expected a string, got 42",
    ],
    [
      "a map value that is null",
      CreatePaymentRequestSchema,
      { metadata: { order: null } },
      "IR_05",
      "Invalid value for field metadata.order: expected a string, got null",
    ],
    // The text rule, anywhere: IR_06 naming the field.
    [
      "a NUL in a field",
      CreateCustomerRequestSchema,
      { name: "a\u0000b" },
      "IR_06",
      "Invalid value for field name: text must not contain NUL characters or unpaired UTF-16 surrogates",
    ],
    [
      "an unpaired surrogate in a field",
      CreateCustomerRequestSchema,
      { name: "\ud800" },
      "IR_06",
      "Invalid value for field name: text must not contain NUL",
    ],
    [
      "a NUL in a nested field",
      CreateCustomerRequestSchema,
      { address: { city: "Pa\u0000ris" } },
      "IR_06",
      "Invalid value for field address.city: text must not contain NUL",
    ],
    [
      "a NUL in a map value",
      CreateCustomerRequestSchema,
      { metadata: { note: "\u0000" } },
      "IR_06",
      "Invalid value for field metadata.note: text must not contain NUL",
    ],
    [
      "an unpaired surrogate in a map key",
      CreateCustomerRequestSchema,
      { metadata: { "\udc00": "v" } },
      "IR_06",
      "Invalid value for field metadata (a key): text must not contain NUL",
    ],
  ])("refuses %s with %s naming the field", (_, schema, json, code, message) => {
    expect(refusal(schema, json)).toEqual([code, expect.stringContaining(message)]);
  });

  it.each([
    [
      "a card number given as a number",
      { payment_method_data: { card: { card_number: 4242424242424242 } } },
      "Invalid value for field payment_method_data.card.card_number: expected a string, got a number",
    ],
    ["a card number as an unknown key", { "4242424242424242": "x" }, "Unknown field: [redacted]"],
    ["a CVC in the wrong field", { confirm: "123" }, "Invalid value for field confirm: expected true or false, got a string"],
  ])("never quotes card data back: %s", (_, json, message) => {
    expect(refusal(CreatePaymentRequestSchema, json)?.[1]).toBe(message);
  });

  it("keeps an error message short whatever the key it quotes", () => {
    const [code, message] = refusal(CreateCustomerRequestSchema, { ["x".repeat(5000)]: 1 })!;
    expect(code).toBe("IR_06");
    expect(message.length).toBeLessThanOrEqual(1000);
  });
});

/*
 * RPC → REST → RPC parity: every message of every service, requests and responses, filled with a
 * value in every field (and empty), written in the dialect, sent as JSON text and read back, is the
 * message it was. Timestamps are whole milliseconds: the dialect writes no finer.
 */

const services = [
  HealthService,
  MerchantService,
  ApiKeyService,
  CustomerService,
  PaymentMethodService,
  MandateService,
  PaymentService,
  RefundService,
  PayoutService,
  DisputeService,
  BalanceService,
  EventService,
  SandboxService,
];
const schemas = [
  ...new Map(services.flatMap((s) => s.methods.flatMap((m) => [m.input, m.output])).map((schema) => [schema.typeName, schema])).values(),
];

/** A value for a scalar field of `type`, distinct per field so that a field read into another shows. */
function scalarSample(type: ScalarType, name: string): unknown {
  switch (type) {
    case ScalarType.STRING:
      return `${name} é 😀`;
    case ScalarType.BOOL:
      return true;
    case ScalarType.BYTES:
      return new TextEncoder().encode(name);
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return 0.5;
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return BigInt(name.length * 1_000_003);
    default:
      return name.length;
  }
}

/** A `schema` message with every field set: each list and map with two entries, each enum at its last value. */
function filled(schema: DescMessage): ReflectMessage {
  if (schema.typeName === TimestampSchema.typeName) return reflect(TimestampSchema, timestampFromMs(1_769_860_800_123));
  if (schema.typeName === StructSchema.typeName) {
    return reflect(StructSchema, fromJson(StructSchema, { amount: 5, ok: true, none: null, list: [1, "two"], nested: { k: "v" } }));
  }
  const message = reflect(schema);
  for (const field of schema.fields) {
    switch (field.fieldKind) {
      case "scalar":
        message.set(field, scalarSample(field.scalar, field.name));
        break;
      case "enum":
        message.set(field, field.enum.values.at(-1)!.number);
        break;
      case "message":
        message.set(field, filled(field.message));
        break;
      case "list": {
        const list = message.get(field) as ReflectList;
        for (let i = 0; i < 2; i++) {
          if (field.listKind === "scalar") list.add(scalarSample(field.scalar, `${field.name}${i}`));
          else if (field.listKind === "enum") list.add(field.enum.values.at(-1)!.number);
          else list.add(filled(field.message));
        }
        break;
      }
      case "map": {
        const map = message.get(field) as ReflectMap;
        for (const key of ["a", "b c"]) {
          if (field.mapKind === "scalar") map.set(key, scalarSample(field.scalar, key));
          else if (field.mapKind === "enum") map.set(key, field.enum.values.at(-1)!.number);
          else map.set(key, filled(field.message));
        }
        break;
      }
    }
  }
  return message;
}

/** `message` written in the dialect, through JSON text as on the wire, and read back. */
function restRoundTrip(schema: DescMessage, message: Message): Message {
  const json = JSON.parse(JSON.stringify(writeMessage(message, schema))) as JsonValue;
  return readMessage(schema, json).message;
}

describe("RPC → REST → RPC parity", () => {
  it("covers the messages of every service", () => {
    expect(schemas.length).toBeGreaterThan(40);
  });

  describe.each(schemas.map((schema) => [schema.typeName, schema] as const))("%s", (_, schema) => {
    it("with every field set, comes back as it was", () => {
      const message = filled(schema).message;
      expect(equals(schema, restRoundTrip(schema, message), message)).toBe(true);
    });

    it("empty, comes back empty", () => {
      const message = create(schema);
      expect(equals(schema, restRoundTrip(schema, message), message)).toBe(true);
    });
  });

  it.each([
    [
      "a customer with an address and metadata",
      CustomerSchema,
      create(CustomerSchema, { customerId: "cus_1", address: { city: "Paris", country: "FR" }, metadata: { a: "b" } }),
    ],
    [
      "a payment with optional values set to their zero value",
      PaymentSchema,
      create(PaymentSchema, { amountReceived: 0n, customerId: "", metadata: {} }),
    ],
    [
      "a health check answer",
      HealthService.method.check.output,
      create(HealthService.method.check.output, { status: "ok", environment: Environment.SANDBOX }),
    ],
  ] as const)("%s comes back as it was", (_, schema, message) => {
    expect(equals(schema as DescMessage, restRoundTrip(schema, message), message)).toBe(true);
  });

  it("the same message reads the same from REST JSON as from proto JSON", () => {
    const rest = readMessage(PaymentSchema, {
      payment_id: "pay_1",
      amount: 1000,
      status: "succeeded",
      created: "2026-01-31T12:00:00.000Z",
      customer_id: null,
    });
    const proto = fromJson(PaymentSchema, {
      paymentId: "pay_1",
      amount: "1000",
      status: "PAYMENT_STATUS_SUCCEEDED",
      created: "2026-01-31T12:00:00Z",
    });
    expect(equals(PaymentSchema, rest.message as Payment, proto)).toBe(true);
  });
});
