import * as http2 from "node:http2";
import { describe, expect, it } from "vitest";
import { rest } from "./support/clients.js";
import { runningService } from "./support/running.js";

const service = runningService();

/** An empty message in gRPC's length-prefixed framing. */
const emptyFrame = new Uint8Array(5);

/** One gRPC call over a fresh HTTP/2 prior-knowledge connection, as a gRPC client sends it. */
function grpcCall(
  baseUrl: string,
  path: string,
): Promise<{ status: number; headers: http2.IncomingHttpHeaders; trailers: http2.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(baseUrl);
    session.once("error", reject);
    const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers" });
    let headers: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    stream.once("response", (h) => {
      headers = h;
    });
    stream.once("trailers", (t) => {
      trailers = t;
    });
    stream.on("data", () => {});
    stream.once("error", reject);
    stream.once("close", () => {
      session.close();
      resolve({ status: Number(headers[":status"]), headers, trailers });
    });
    stream.end(emptyFrame);
  });
}

const unknownProcedures = ["/paymentservice.v1.PaymentService/NoSuch", "/no.such.Service/Method"];

describe("a call to a method the service does not serve", () => {
  it.each(unknownProcedures)("is UNIMPLEMENTED in gRPC's own form: %s", async (procedure) => {
    const { status, headers, trailers } = await grpcCall(service.url, procedure);
    expect(status).toBe(200);
    expect(headers["content-type"]).toMatch(/^application\/grpc/);
    expect(trailers["grpc-status"] ?? headers["grpc-status"]).toBe("12");
  });

  it.each(unknownProcedures)("is UNIMPLEMENTED in gRPC-Web's own form: %s", async (procedure) => {
    const res = await fetch(service.url + procedure, {
      method: "POST",
      headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1" },
      body: emptyFrame,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/grpc-web/);
    expect(res.headers.get("grpc-status")).toBe("12");
    await res.arrayBuffer();
  });

  it.each(unknownProcedures)("is Connect's error JSON with code unimplemented: %s", async (procedure) => {
    const encodings: [contentType: string, body: string][] = [
      ["application/json", "{}"],
      ["application/proto", ""],
    ];
    for (const [contentType, body] of encodings) {
      const res = await fetch(service.url + procedure, { method: "POST", headers: { "content-type": contentType }, body });
      expect(res.status, contentType).toBe(404);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      const error = (await res.json()) as { code: string; message: string };
      expect(error.code).toBe("unimplemented");
      expect(error.message).toContain(procedure);
    }
  });

  it("leaves REST paths that do not exist at 404 IR_02", async () => {
    const res = await rest(service.url, "POST", "/nothing-here", { body: {} });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe("IR_02");
  });
});
