import type { IncomingMessage } from "node:http";
import { createServiceImplSpec } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { EventService } from "../../gen/paymentservice/v1/event_pb.js";
import { routerOptions } from "../app.js";
import { DirectMethods } from "./direct-call.js";
import { GrpcUnaryHandler } from "./grpc-unary.js";

const specs = Object.values(createServiceImplSpec(EventService, {}).methods);
const handler = new GrpcUnaryHandler(new DirectMethods(specs, routerOptions));
const unary = EventService.method.retrieveEvent;

/** A request with `headers`, over HTTP/2 and POST unless told. */
function request(headers: Record<string, string>, httpVersionMajor = 2, method = "POST"): IncomingMessage {
  return { method, headers, httpVersionMajor } as unknown as IncomingMessage;
}

describe("GrpcUnaryHandler.accepts: which gRPC calls the port answers itself", () => {
  it.each([
    [{ "content-type": "application/grpc" }],
    [{ "content-type": "application/grpc+proto" }],
    [{ "content-type": "application/grpc", "grpc-encoding": "identity" }],
    [{ "content-type": "application/grpc", "grpc-accept-encoding": "identity,deflate,gzip", te: "trailers" }],
    [{ "content-type": "application/grpc", "grpc-timeout": "1S" }],
    [{ "content-type": "application/grpc", "grpc-timeout": "250000u" }],
  ])("answers a unary call with %j", (headers) => {
    expect(handler.accepts(request(headers), unary)).toBe(true);
  });

  it.each([
    ["a compressed message", { "content-type": "application/grpc", "grpc-encoding": "gzip" }],
    ["a deadline connect refuses (no unit)", { "content-type": "application/grpc", "grpc-timeout": "1000" }],
    ["a deadline connect refuses (over eight digits)", { "content-type": "application/grpc", "grpc-timeout": "123456789m" }],
    ["JSON messages", { "content-type": "application/grpc+json" }],
    ["gRPC-Web", { "content-type": "application/grpc-web+proto" }],
  ])("leaves %s to connect", (_, headers) => {
    expect(handler.accepts(request(headers), unary)).toBe(false);
  });

  it("leaves HTTP/1.1 and a streaming method to connect", () => {
    expect(handler.accepts(request({ "content-type": "application/grpc" }, 1), unary)).toBe(false);
    expect(handler.accepts(request({ "content-type": "application/grpc" }), EventService.method.streamEvents)).toBe(false);
  });
});
