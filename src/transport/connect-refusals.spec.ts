import type { DescMethodUnary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { createMethodSerializationLookup } from "@connectrpc/connect/protocol";
import { describe, expect, it } from "vitest";
import { CustomerService } from "../../gen/paymentservice/v1/customer_pb.js";
import { PaymentService } from "../../gen/paymentservice/v1/payment_pb.js";
import { documentedRefusal } from "./connect-refusals.js";

/*
 * A contract with connect and protobuf-es: documentedRefusal reads the words they refuse a request
 * with. These cases make connect's own serialization refuse real bodies, so an upgrade that changes
 * those words fails here, loudly, instead of degrading the messages clients get.
 */

const createCustomer = CustomerService.method.createCustomer;
const listPayments = PaymentService.method.listPayments;

/** The error connect raises reading `body` as the request of `method` (strict JSON, as the service runs). */
function refusalOf(method: DescMethodUnary, body: string | Uint8Array): ConnectError {
  const serialization = createMethodSerializationLookup(
    method,
    undefined,
    { ignoreUnknownFields: false },
    { readMaxBytes: 1024, writeMaxBytes: 1024 },
  );
  try {
    serialization.getI(typeof body !== "string").parse(typeof body === "string" ? new TextEncoder().encode(body) : body);
  } catch (error) {
    if (error instanceof ConnectError) return error;
    throw error;
  }
  throw new Error("connect read the body");
}

describe("documentedRefusal of what connect could not read", () => {
  it.each([
    ["an unknown field", createCustomer, '{"nmae":"Jane"}', "Unknown field: nmae"],
    ["an unknown nested field", createCustomer, '{"address":{"citty":"Paris"}}', "Unknown field: address.citty"],
    ["a wrong type", createCustomer, '{"email":42}', "Invalid value for field email: expected a string"],
    ["a wrong nested type", createCustomer, '{"address":{"city":[1]}}', "Invalid value for field address.city: expected a string"],
    [
      "an unknown enum name",
      listPayments,
      '{"status":"succeeded"}',
      "Invalid value for field status: expected one of PAYMENT_STATUS_REQUIRES_PAYMENT_METHOD",
    ],
    ["an unpaired surrogate", createCustomer, '{"name":"\\ud800"}', "Invalid value for field name: text must not contain NUL"],
    [
      "an unpaired surrogate in a map",
      createCustomer,
      '{"metadata":{"a":"\\ud800"}}',
      "Invalid value for field metadata: text must not contain NUL",
    ],
    ["broken JSON", createCustomer, '{"name":', "The request body is not valid JSON"],
    ["text that is not JSON", createCustomer, "not json", "The request body is not valid JSON"],
    ["a JSON array", createCustomer, "[]", "The request is not a valid JSON form of paymentservice.v1.CreateCustomerRequest"],
    ["a truncated binary message", createCustomer, new Uint8Array([0x0a, 0x05, 0x61]), "not a valid protobuf message: premature EOF"],
    ["an illegal tag", createCustomer, new Uint8Array([0x07]), "not a valid protobuf message: illegal tag"],
    ["a message over the size limit", createCustomer, new Uint8Array(2048), "larger than 1024 bytes"],
  ])("%s is IR_06 saying so", (_, method, body, says) => {
    const refusal = documentedRefusal(refusalOf(method, body), "POST", method);
    expect(refusal.code).toBe("IR_06");
    expect(refusal.message).toContain(says);
  });

  it("never passes connect's words on: a value it quotes stays out of the message", () => {
    const error = refusalOf(createCustomer, '{"address":"4242424242424242"}');
    expect(error.rawMessage).toContain("4242424242424242");
    expect(documentedRefusal(error, "POST", createCustomer).message).not.toContain("4242");
  });

  it("a refusal nothing recognises is the generic IR_06, and a Connect GET's names the message parameter", () => {
    const unknown = new ConnectError("something new", Code.Internal);
    expect(documentedRefusal(unknown, "POST", createCustomer).message).toBe("The request could not be read");
    expect(documentedRefusal(new ConnectError("internal error", Code.Internal), "GET", listPayments).message).toContain(
      "message query parameter",
    );
  });
});
