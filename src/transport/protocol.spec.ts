import { describe, expect, it } from "vitest";
import { rpcProtocolOf } from "./protocol.js";

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
