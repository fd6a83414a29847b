import { create } from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import { describe, expect, it } from "vitest";
import { CreateCustomerRequestSchema } from "../../gen/paymentservice/v1/customer_pb.js";
import { ListPaymentsRequestSchema, type PaymentStatus } from "../../gen/paymentservice/v1/payment_pb.js";
import { ApiError } from "../errors.js";
import { assertWellFormedMessage } from "./message.js";
import { isWellFormedText } from "./text.js";

/** The refusal a message gets, as [code, message], or undefined when it passes. */
function refusal(check: () => void): [string, string] | undefined {
  try {
    check();
    return undefined;
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    return [error.code, error.message];
  }
}

describe("isWellFormedText", () => {
  it.each([
    ["", true],
    ["Jane Doe", true],
    ["emoji 😀 (a surrogate pair)", true],
    ["a\u0000b", false],
    ["\ud800", false],
    ["x\udc00", false],
    ["\udc00\ud800", false],
  ])("%j → %s", (text, wellFormed) => {
    expect(isWellFormedText(text)).toBe(wellFormed);
  });
});

describe("assertWellFormedMessage", () => {
  const customer = (init: Parameters<typeof create<typeof CreateCustomerRequestSchema>>[1]) =>
    reflect(CreateCustomerRequestSchema, create(CreateCustomerRequestSchema, init));

  it.each([
    ["a scalar", { name: "a\u0000b" }, "name"],
    ["a nested message", { address: { city: "Pa\u0000ris" } }, "address.city"],
    ["a map value", { metadata: { note: "\u0000" } }, "metadata.note"],
    ["a map key", { metadata: { "k\u0000": "v" } }, "metadata (a key)"],
  ])("refuses NUL in %s with IR_06 naming %s", (_, init, field) => {
    expect(refusal(() => assertWellFormedMessage(customer(init)))).toEqual(["IR_06", expect.stringContaining(`field ${field}`)]);
  });

  it("passes a message of well-formed text", () => {
    expect(
      refusal(() => assertWellFormedMessage(customer({ name: "Jane 😀", address: { city: "Paris" }, metadata: { a: "b" } }))),
    ).toBeUndefined();
  });

  it.each([
    ["seconds before year 1", { seconds: -62_135_596_801n, nanos: 0 }],
    ["seconds after year 9999", { seconds: 253_402_300_800n, nanos: 0 }],
    ["negative nanos", { seconds: 0n, nanos: -1 }],
    ["nanos of a whole second", { seconds: 0n, nanos: 1_000_000_000 }],
  ])("refuses a timestamp with %s with IR_05 naming the field", (_, createdGte) => {
    const list = reflect(ListPaymentsRequestSchema, create(ListPaymentsRequestSchema, { createdGte }));
    expect(refusal(() => assertWellFormedMessage(list))).toEqual(["IR_05", expect.stringContaining("created_gte")]);
  });

  it("passes the first and the last instant a timestamp may hold", () => {
    const list = reflect(
      ListPaymentsRequestSchema,
      create(ListPaymentsRequestSchema, {
        createdGte: { seconds: -62_135_596_800n },
        createdLte: { seconds: 253_402_300_799n, nanos: 999_999_999 },
      }),
    );
    expect(refusal(() => assertWellFormedMessage(list))).toBeUndefined();
  });

  it("refuses an enum number the enum lacks with IR_05 naming the field", () => {
    const list = reflect(ListPaymentsRequestSchema, create(ListPaymentsRequestSchema, { status: 99 as PaymentStatus }));
    expect(refusal(() => assertWellFormedMessage(list))).toEqual(["IR_05", expect.stringContaining("status")]);
  });
});
