import type { IncomingMessage } from "node:http";
import { createServiceImplSpec } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { EventService } from "../../gen/paymentservice/v1/event_pb.js";
import { routerOptions } from "../app.js";
import { ConnectUnaryHandler } from "./connect-unary.js";
import { DirectMethods } from "./direct-call.js";

const specs = Object.values(createServiceImplSpec(EventService, {}).methods);
const handler = new ConnectUnaryHandler(new DirectMethods(specs, routerOptions));
const unary = EventService.method.retrieveEvent;

/** A request with `headers` (and POST unless told). */
function request(headers: Record<string, string>, method = "POST"): IncomingMessage {
  return { method, headers } as unknown as IncomingMessage;
}

describe("ConnectUnaryHandler.accepts: which Connect calls the port answers itself", () => {
  it.each([
    [{ "content-type": "application/json" }],
    [{ "content-type": "application/proto" }],
    [{ "content-type": "application/json", "content-encoding": "identity" }],
    [{ "content-type": "application/json", "accept-encoding": "gzip, br" }],
    [{ "content-type": "application/proto", "connect-protocol-version": "1", "transfer-encoding": "chunked" }],
    [{ "content-type": "application/json", "connect-timeout-ms": "1000" }],
    [{ "content-type": "application/json", "connect-timeout-ms": "0" }],
  ])("answers a unary POST with %j", (headers) => {
    expect(handler.accepts(request(headers), unary)).toBe(true);
  });

  it.each([
    ["a compressed body", { "content-type": "application/json", "content-encoding": "gzip" }],
    ["a deadline connect refuses (not digits)", { "content-type": "application/json", "connect-timeout-ms": "1s" }],
    ["a deadline connect refuses (over ten digits)", { "content-type": "application/json", "connect-timeout-ms": "12345678901" }],
    ["another spelling of the content type", { "content-type": "application/json; charset=utf-8" }],
    ["a streaming content type", { "content-type": "application/connect+json" }],
    ["no content type", {}],
  ])("leaves %s to connect", (_, headers) => {
    expect(handler.accepts(request(headers), unary)).toBe(false);
  });

  it("leaves a GET (side-effect-free methods) and a streaming method to connect", () => {
    expect(handler.accepts(request({}, "GET"), unary)).toBe(false);
    expect(handler.accepts(request({ "content-type": "application/json" }), EventService.method.streamEvents)).toBe(false);
  });
});
