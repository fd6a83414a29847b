import { create, createFileRegistry, type DescMessage, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import {
  FieldDescriptorProto_Label as Label,
  FieldDescriptorProto_Type as Type,
  FileDescriptorProtoSchema,
  file_google_protobuf_timestamp,
} from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { ListApiKeysRequestSchema } from "../../../gen/paymentservice/v1/api_key_pb.js";
import { RetrieveProfileRequestSchema } from "../../../gen/paymentservice/v1/merchant_pb.js";
import {
  ConfirmPaymentRequestSchema,
  ListPaymentsRequestSchema,
  PaymentMethod,
  PaymentStatus,
  RetrievePaymentRequestSchema,
} from "../../../gen/paymentservice/v1/payment_pb.js";
import { ApiError } from "../../errors.js";
import { applyPathVariables, applyQuery } from "./params.js";

/*
 * What a REST request carries outside its body: path variables (still percent-encoded when matched)
 * and, on a route without a body, query parameters. Query values are text; each becomes the JSON
 * value its field expects and goes through the REST codec, so a mistake gets the same documented
 * error (code and field name) whether it came in the query or in a body.
 */

/** The refusal of `apply`, as [code, message], or undefined when it passes. */
function refusal(apply: () => void): [string, string] | undefined {
  try {
    apply();
    return undefined;
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    return [error.code, error.message];
  }
}

/** The request `query` makes of an empty `schema` message. */
function fromQuery<Desc extends DescMessage>(schema: Desc, query: string): MessageShape<Desc> {
  const target = reflect(schema);
  applyQuery(target, new URLSearchParams(query));
  return target.message as MessageShape<Desc>;
}

describe("applyQuery on a list request", () => {
  const list = (init: MessageInitShape<typeof ListPaymentsRequestSchema>) => create(ListPaymentsRequestSchema, init);

  it.each([
    ["", list({})],
    ["limit=5", list({ limit: 5 })],
    ["limit=5&offset=20", list({ limit: 5, offset: 20 })],
    ["limit=05", list({ limit: 5 })],
    ["status=requires_capture", list({ status: PaymentStatus.REQUIRES_CAPTURE })],
    ["payment_method=bank_transfer", list({ paymentMethod: PaymentMethod.BANK_TRANSFER })],
    ["customer_id=cus_1&currency=EUR", list({ customerId: "cus_1", currency: "EUR" })],
    ["customer_id=", list({ customerId: "" })],
    ["customer_id=caf%C3%A9+cr%C3%A8me", list({ customerId: "café crème" })],
    // A string field takes the text as it is, digits included: it is never read as a number.
    ["customer_id=123", list({ customerId: "123" })],
    ["created_gte=2026-01-31T12:00:00Z", list({ createdGte: { seconds: 1_769_860_800n } })],
    ["created_lte=2026-01-31T12:00:00.250Z", list({ createdLte: { seconds: 1_769_860_800n, nanos: 250_000_000 } })],
    ["created_gte=2026-01-31T13:00:00%2B01:00", list({ createdGte: { seconds: 1_769_860_800n } })],
  ])("?%s reads as %o", (query, expected) => {
    expect(fromQuery(ListPaymentsRequestSchema, query)).toEqual(expected);
  });

  it("keeps the offset as sent: its range is the list's rule, checked where the list is read", () => {
    expect(fromQuery(ListPaymentsRequestSchema, "offset=-1").offset).toBe(-1);
  });

  it.each([
    // limit declares (invalid_value_code) = "IR_06": any bad limit is IR_06, not IR_05.
    ["a limit that is not a number", "limit=ten", "IR_06", "Invalid value for field limit: expected an integer"],
    ["an empty limit", "limit=", "IR_06", 'Invalid value for field limit: expected an integer, got ""'],
    ["a fractional limit", "limit=1.5", "IR_06", "Invalid value for field limit: expected an integer, got 1.5"],
    ["a limit in exponent form", "limit=1e3", "IR_06", "Invalid value for field limit: expected an integer"],
    ["a limit given twice", "limit=5&limit=6", "IR_06", "Invalid value for field limit: the query parameter is given more than once"],
    ["a limit beyond int32", "limit=99999999999", "IR_06", "Invalid value for field limit: the integer is out of range"],
    // An unencoded "+" is a space in a query string.
    ["a limit with an unencoded plus", "limit=+5", "IR_06", 'Invalid value for field limit: expected an integer, got " 5"'],
    ["an offset that is not a number", "offset=ten", "IR_05", "Invalid value for field offset: expected an integer"],
    ["an offset given twice", "offset=1&offset=2", "IR_05", "Invalid value for field offset: the query parameter is given more than once"],
    [
      "a status in upper case",
      "status=SUCCEEDED",
      "IR_05",
      "Invalid value for field status: expected one of requires_payment_method, requires_confirmation",
    ],
    ["a status by its proto name", "status=PAYMENT_STATUS_SUCCEEDED", "IR_05", "Invalid value for field status: expected one of"],
    ["a status by its number", "status=6", "IR_05", "Invalid value for field status: expected one of"],
    ["the unspecified status", "status=unspecified", "IR_05", 'got "unspecified"'],
    [
      "a status given twice",
      "status=succeeded&status=failed",
      "IR_05",
      "Invalid value for field status: the query parameter is given more than once",
    ],
    ["a date without a time", "created_gte=2026-01-31", "IR_05", "Invalid value for field created_gte: expected an ISO 8601 timestamp"],
    [
      "a time without a zone",
      "created_gte=2026-01-31T12:00:00",
      "IR_05",
      "Invalid value for field created_gte: expected an ISO 8601 timestamp",
    ],
    ["an offset zone whose plus was not encoded", "created_gte=2026-01-31T13:00:00+01:00", "IR_05", "Invalid value for field created_gte"],
    [
      "a timestamp as epoch seconds",
      "created_gte=1769860800",
      "IR_05",
      "Invalid value for field created_gte: expected an ISO 8601 timestamp",
    ],
    ["a parameter the request lacks", "nope=1", "IR_06", "Unknown query parameter: nope"],
    ["a parameter in camelCase", "createdGte=2026-01-31T12:00:00Z", "IR_06", "Unknown query parameter: createdGte"],
    ["a parameter of another request", "merchant_id=mer_1", "IR_06", "Unknown query parameter: merchant_id"],
    ["a NUL in a text parameter", "customer_id=a%00b", "IR_06", "Invalid value for field customer_id: text must not contain NUL"],
  ])("refuses %s (?%s) with %s naming the field", (_, query, code, message) => {
    expect(refusal(() => fromQuery(ListPaymentsRequestSchema, query))).toEqual([code, expect.stringContaining(message)]);
  });

  it("never quotes a value that could be card data", () => {
    const [code, message] = refusal(() => fromQuery(ListPaymentsRequestSchema, "limit=4242424242424242x"))!;
    expect(code).toBe("IR_06");
    expect(message).not.toContain("4242");
  });

  it("reads the list parameters of another request the same way", () => {
    expect(fromQuery(ListApiKeysRequestSchema, "merchant_id=mer_1&limit=100")).toEqual(
      create(ListApiKeysRequestSchema, { merchantId: "mer_1", limit: 100 }),
    );
    expect(refusal(() => fromQuery(ListApiKeysRequestSchema, "limit=x"))?.[0]).toBe("IR_06");
  });

  it.each([
    [
      "a nested field of a message",
      ConfirmPaymentRequestSchema,
      "payment_method_data=x",
      "IR_05",
      "Invalid value for field payment_method_data: this field cannot be given as a query parameter",
    ],
    [
      "a dotted path into a message",
      ConfirmPaymentRequestSchema,
      "customer_acceptance.acceptance_type=online",
      "IR_06",
      "Unknown query parameter: customer_acceptance.acceptance_type",
    ],
  ] as const)("refuses %s: a query addresses top-level fields only", (_, schema, query, code, message) => {
    expect(refusal(() => fromQuery(schema, query))).toEqual([code, message]);
  });

  it("merges into what the message already holds", () => {
    const target = reflect(RetrievePaymentRequestSchema, create(RetrievePaymentRequestSchema, { paymentId: "pay_1" }));
    applyQuery(target, new URLSearchParams("client_secret=pay_1_secret_x"));
    expect(target.message).toEqual(create(RetrievePaymentRequestSchema, { paymentId: "pay_1", clientSecret: "pay_1_secret_x" }));
  });
});

/**
 * A request of every kind of field a query could name — no request of the API has repeated fields or
 * a bool on a GET route yet — built as protoc would from:
 *
 *   enum Kind { KIND_UNSPECIFIED = 0; KIND_SMALL = 1; KIND_LARGE = 2; }
 *   message Inner { string id = 1; }
 *   message Filters {
 *     repeated string tags = 1; repeated int32 counts = 2; repeated Kind kinds = 3; bool flag = 4;
 *     double ratio = 5; bytes blob = 6; int64 big = 7; Inner inner = 8; map<string, string> labels = 9;
 *     repeated google.protobuf.Timestamp times = 10; repeated Inner inners = 11; uint32 small = 12;
 *   }
 */
const FiltersSchema: DescMessage = (() => {
  const field = (name: string, number: number, type: Type, extra: { label?: Label; typeName?: string } = {}) => ({
    name,
    number,
    type,
    label: extra.label ?? Label.OPTIONAL,
    typeName: extra.typeName,
  });
  const repeated = { label: Label.REPEATED };
  const file = create(FileDescriptorProtoSchema, {
    name: "spec/filters.proto",
    package: "spec",
    syntax: "proto3",
    dependency: ["google/protobuf/timestamp.proto"],
    enumType: [
      {
        name: "Kind",
        value: [
          { name: "KIND_UNSPECIFIED", number: 0 },
          { name: "KIND_SMALL", number: 1 },
          { name: "KIND_LARGE", number: 2 },
        ],
      },
    ],
    messageType: [
      { name: "Inner", field: [field("id", 1, Type.STRING)] },
      {
        name: "Filters",
        field: [
          field("tags", 1, Type.STRING, repeated),
          field("counts", 2, Type.INT32, repeated),
          field("kinds", 3, Type.ENUM, { ...repeated, typeName: ".spec.Kind" }),
          field("flag", 4, Type.BOOL),
          field("ratio", 5, Type.DOUBLE),
          field("blob", 6, Type.BYTES),
          field("big", 7, Type.INT64),
          field("inner", 8, Type.MESSAGE, { typeName: ".spec.Inner" }),
          field("labels", 9, Type.MESSAGE, { ...repeated, typeName: ".spec.Filters.LabelsEntry" }),
          field("times", 10, Type.MESSAGE, { ...repeated, typeName: ".google.protobuf.Timestamp" }),
          field("inners", 11, Type.MESSAGE, { ...repeated, typeName: ".spec.Inner" }),
          field("small", 12, Type.UINT32),
        ],
        nestedType: [
          { name: "LabelsEntry", field: [field("key", 1, Type.STRING), field("value", 2, Type.STRING)], options: { mapEntry: true } },
        ],
      },
    ],
  });
  const registry = createFileRegistry(file, (name) =>
    name === "google/protobuf/timestamp.proto" ? file_google_protobuf_timestamp : undefined,
  );
  return registry.getMessage("spec.Filters")!;
})();

describe("applyQuery by kind of field", () => {
  /** The message `query` makes. */
  function read(query: string): unknown {
    const target = reflect(FiltersSchema);
    applyQuery(target, new URLSearchParams(query));
    return target.message;
  }

  it.each([
    ["a repeated string, one value per occurrence", "tags=a&tags=b&tags=a", { tags: ["a", "b", "a"] }],
    ["a repeated string given once", "tags=a", { tags: ["a"] }],
    ["a repeated integer", "counts=1&counts=-2", { counts: [1, -2] }],
    ["a repeated enum", "kinds=large&kinds=small", { kinds: [2, 1] }],
    ["a repeated timestamp", "times=2026-01-31T12:00:00Z", { times: [{ seconds: 1_769_860_800n }] }],
    ["a bool true", "flag=true", { flag: true }],
    ["a double", "ratio=0.25", { ratio: 0.25 }],
    ["a negative int64", "big=-42", { big: -42n }],
    ["the largest safe int64", "big=9007199254740991", { big: 9_007_199_254_740_991n }],
    ["bytes as base64", "blob=aGk%3D", { blob: new Uint8Array([0x68, 0x69]) }],
    ["parameters in any order", "small=7&tags=x", { small: 7, tags: ["x"] }],
  ])("%s: ?%s", (_, query, expected) => {
    expect(read(query)).toEqual(create(FiltersSchema, expected));
  });

  it("a bool false is read, not taken for absent", () => {
    const target = reflect(FiltersSchema);
    target.set(FiltersSchema.fields.find((f) => f.name === "flag")!, true);
    applyQuery(target, new URLSearchParams("flag=false"));
    expect((target.message as unknown as { flag: boolean }).flag).toBe(false);
  });

  it.each([
    ["one bad item of a repeated integer", "counts=1&counts=x", "IR_05", 'Invalid value for field counts[1]: expected an integer, got "x"'],
    [
      "one bad item of a repeated enum",
      "kinds=small&kinds=huge",
      "IR_05",
      'Invalid value for field kinds[1]: expected one of small, large, got "huge"',
    ],
    [
      "a NUL in a repeated string",
      "tags=ok&tags=%00",
      "IR_06",
      "Invalid value for field tags[1]: text must not contain NUL characters or unpaired UTF-16 surrogates",
    ],
    ["a bool in upper case", "flag=TRUE", "IR_05", 'Invalid value for field flag: expected true or false, got "TRUE"'],
    ["a bool as a digit", "flag=1", "IR_05", 'Invalid value for field flag: expected true or false, got "1"'],
    ["an empty bool", "flag=", "IR_05", 'Invalid value for field flag: expected true or false, got ""'],
    ["a bool given twice", "flag=true&flag=true", "IR_05", "Invalid value for field flag: the query parameter is given more than once"],
    ["a double that is not a number", "ratio=half", "IR_05", 'Invalid value for field ratio: expected a number, got "half"'],
    ["an int64 beyond 2^53 - 1", "big=9007199254740992", "IR_05", "Invalid value for field big: the integer is out of range"],
    ["a negative uint32", "small=-1", "IR_05", "Invalid value for field small: the integer is out of range"],
    ["a message", "inner=x", "IR_05", "Invalid value for field inner: this field cannot be given as a query parameter"],
    ["a map", "labels=x", "IR_05", "Invalid value for field labels: this field cannot be given as a query parameter"],
    ["a repeated message", "inners=x", "IR_05", 'Invalid value for field inners[0]: expected an object, got "x"'],
  ])("refuses %s (?%s) with %s naming the field", (_, query, code, message) => {
    expect(refusal(() => read(query))).toEqual([code, message]);
  });
});

describe("applyPathVariables", () => {
  const paymentId = RetrievePaymentRequestSchema.field.paymentId;

  /** The payment_id a raw path segment sets. */
  const paymentIdOf = (raw: string): string => {
    const request = create(RetrievePaymentRequestSchema);
    applyPathVariables(reflect(RetrievePaymentRequestSchema, request), [paymentId], [raw]);
    return request.paymentId;
  };

  it.each([
    ["pay_1", "pay_1"],
    ["a%2Fb", "a/b"],
    ["caf%C3%A9", "café"],
    ["a%20b", "a b"],
    // In a path, unlike a query, "+" is itself.
    ["a+b", "a+b"],
    ["%25", "%"],
    ["%3F%23", "?#"],
    ["%F0%9F%98%80", "😀"],
    // NUL decodes here; the request rules refuse it (IR_06 naming the field) on every protocol alike.
    ["%00", "\u0000"],
  ])("%s sets the id %j", (raw, id) => {
    expect(paymentIdOf(raw)).toBe(id);
  });

  it.each([
    ["a lone %", "%"],
    ["a truncated escape", "%E0%A4%A"],
    ["a non-hex escape", "%zz"],
    ["bytes that are not UTF-8", "%C3%28"],
    ["an encoded surrogate half", "%ED%A0%80"],
  ])("refuses %s (%s) with IR_05 naming the field", (_, raw) => {
    expect(refusal(() => paymentIdOf(raw))).toEqual([
      "IR_05",
      "Invalid value for field payment_id: the path segment is not valid percent-encoding",
    ]);
  });

  it("sets each variable to its field, in path order", () => {
    const target = reflect(RetrieveProfileRequestSchema);
    applyPathVariables(
      target,
      [RetrieveProfileRequestSchema.field.merchantId, RetrieveProfileRequestSchema.field.profileId],
      ["mer_1", "pro%5F2"],
    );
    expect(target.message).toEqual(create(RetrieveProfileRequestSchema, { merchantId: "mer_1", profileId: "pro_2" }));
  });

  it("wins over the same field in the body, as the HttpRule specification has it", () => {
    const target = reflect(
      ConfirmPaymentRequestSchema,
      create(ConfirmPaymentRequestSchema, { paymentId: "pay_from_body", returnUrl: "https://example.com" }),
    );
    applyPathVariables(target, [ConfirmPaymentRequestSchema.field.paymentId], ["pay_from_path"]);
    expect(target.message).toEqual(create(ConfirmPaymentRequestSchema, { paymentId: "pay_from_path", returnUrl: "https://example.com" }));
  });

  it("leaves the other fields alone", () => {
    const target = reflect(ListPaymentsRequestSchema, create(ListPaymentsRequestSchema, { limit: 3 }));
    applyPathVariables(target, [], []);
    expect(target.message).toEqual(create(ListPaymentsRequestSchema, { limit: 3 }));
  });
});
