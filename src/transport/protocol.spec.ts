import { describe, expect, it } from "vitest";
import { rpcProtocolOf, unservedRpcProtocolOf } from "./protocol.js";
import type { RequestTarget } from "./request-target.js";

describe("rpcProtocolOf", () => {
  it.each([
    ["POST", "application/json", "connect"],
    ["POST", "application/json; charset=utf-8", "connect"],
    ["POST", "application/proto", "connect"],
    ["POST", "application/connect+proto", "connect"],
    ["GET", undefined, "connect"],
    ["POST", "application/grpc", "grpc"],
    ["POST", "application/grpc+proto", "grpc"],
    ["POST", "application/grpc+json", "grpc"],
    ["POST", "application/grpc-web", "grpc-web"],
    ["POST", "application/grpc-web+proto", "grpc-web"],
    ["POST", "application/grpc-web+json", "grpc-web"],
    ["POST", "application/grpc-web-text", undefined],
    ["POST", "text/plain", undefined],
    ["POST", "application/x-www-form-urlencoded", undefined],
    ["POST", undefined, undefined],
  ] as const)("%s with content type %s speaks %s", (method, contentType, protocol) => {
    expect(rpcProtocolOf(method, contentType)).toBe(protocol);
  });
});

describe("unservedRpcProtocolOf", () => {
  const target = (path: string, query = ""): RequestTarget => ({ path, query: new URLSearchParams(query) });

  it.each([
    ["POST", "application/grpc", "/no.such.Service/Method", "grpc"],
    ["POST", "application/grpc+proto", "/paymentservice.v1.PaymentService/NoSuch", "grpc"],
    ["POST", "application/grpc", "/customers", "grpc"],
    ["POST", "application/grpc-web+proto", "/no.such.Service/Method", "grpc-web"],
    ["POST", "application/json", "/paymentservice.v1.PaymentService/NoSuch", "connect"],
    ["POST", "application/proto", "/no.such.Service/Method", "connect"],
    ["POST", "application/json", "/customers/cus_1/unknown", undefined],
    ["POST", "application/json", "/nothing-here", undefined],
    ["POST", "application/json", "/NoPackage/Method", undefined],
    ["POST", "text/plain", "/no.such.Service/Method", undefined],
    ["GET", undefined, "/nothing-here", undefined],
  ] as const)("%s %s to %s is answered as %s", (method, contentType, path, protocol) => {
    expect(unservedRpcProtocolOf(method, contentType, target(path))).toBe(protocol);
  });

  it("takes a GET to a procedure-shaped path as Connect only when it says connect=v1", () => {
    expect(unservedRpcProtocolOf("GET", undefined, target("/no.such.Service/Method", "connect=v1&encoding=json"))).toBe("connect");
    expect(unservedRpcProtocolOf("GET", undefined, target("/no.such.Service/Method"))).toBeUndefined();
  });
});
