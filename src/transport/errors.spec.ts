import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { describe, expect, it } from "vitest";
import { ErrorDetailSchema, type ErrorDetail } from "../../gen/paymentservice/v1/error_pb.js";
import { ApiError, errorCatalogue, type ErrorCode } from "../errors.js";
import {
  closeIfBodyUnread,
  documentedCodeOf,
  documentedError,
  toConnectError,
  toRestError,
  writeError,
  type NodeResponse,
} from "./errors.js";
import type { WireProtocol } from "./protocol.js";

/*
 * One conversion of errors to the wire: whatever a call threw becomes a ConnectError carrying the
 * documented ErrorDetail, written in the shape of the request's protocol. Every code of the
 * catalogue must reach a client of every protocol with the same code, type and message, and with
 * the HTTP status or Connect/gRPC code docs/api-conventions.md documents.
 */

/**
 * The error table of docs/api-conventions.md, written out here rather than taken from src/, so that
 * a catalogue row drifting from the documentation fails: [REST HTTP status, type, Connect code,
 * its name on the Connect wire, the HTTP status Connect answers it with].
 */
const documented: Record<ErrorCode, [number, string, Code, string, number]> = {
  IR_00: [501, "invalid_request", Code.Unimplemented, "unimplemented", 501],
  IR_01: [401, "authentication_error", Code.Unauthenticated, "unauthenticated", 401],
  IR_02: [404, "invalid_request", Code.NotFound, "not_found", 404],
  IR_03: [405, "invalid_request", Code.Unimplemented, "unimplemented", 501],
  IR_04: [400, "invalid_request", Code.InvalidArgument, "invalid_argument", 400],
  IR_05: [400, "invalid_request", Code.InvalidArgument, "invalid_argument", 400],
  IR_06: [400, "invalid_request", Code.InvalidArgument, "invalid_argument", 400],
  IR_13: [400, "invalid_request", Code.FailedPrecondition, "failed_precondition", 400],
  IR_14: [400, "invalid_request", Code.FailedPrecondition, "failed_precondition", 400],
  IR_16: [400, "invalid_request", Code.FailedPrecondition, "failed_precondition", 400],
  IR_22: [403, "authentication_error", Code.PermissionDenied, "permission_denied", 403],
  HE_00: [500, "api_error", Code.Internal, "internal", 500],
  HE_01: [409, "invalid_request", Code.AlreadyExists, "already_exists", 409],
  HE_02: [404, "invalid_request", Code.NotFound, "not_found", 404],
  IK_01: [409, "idempotency_error", Code.Aborted, "aborted", 409],
  IK_02: [422, "idempotency_error", Code.InvalidArgument, "invalid_argument", 400],
  RL_01: [429, "rate_limit_error", Code.ResourceExhausted, "resource_exhausted", 429],
  TO_01: [504, "timeout_error", Code.DeadlineExceeded, "deadline_exceeded", 504],
  SU_01: [503, "api_error", Code.Unavailable, "unavailable", 503],
};
const codes = Object.keys(documented) as ErrorCode[];

/** A Node response of HTTP/1.1 that keeps what is written to it. */
class RecordedResponse {
  statusCode = 200;
  headersSent = false;
  destroyed = false;
  body: Buffer | undefined;
  readonly headers = new Map<string, string>();
  readonly req: { complete: boolean; destroyed: boolean; headers: Record<string, string> };

  constructor(req: Partial<RecordedResponse["req"]> = {}) {
    this.req = { complete: true, destroyed: false, headers: {}, ...req };
  }

  setHeader(name: string, value: string | number): this {
    this.headers.set(name.toLowerCase(), String(value));
    return this;
  }

  end(body: string | Uint8Array = ""): void {
    this.body = Buffer.from(body);
    this.headersSent = true;
  }

  destroy(): void {
    this.destroyed = true;
  }

  get node(): NodeResponse {
    return this as unknown as NodeResponse;
  }
}

/** What a client of `protocol` reads from the answer `error` is written as: the status, and the error it decodes. */
function received(
  protocol: WireProtocol,
  error: ConnectError,
  status?: number,
): { status: number; code: Code | string; detail: ErrorDetail | undefined; res: RecordedResponse } {
  const res = new RecordedResponse();
  writeError(res.node, protocol, error, status);
  switch (protocol) {
    case "rest": {
      const body = JSON.parse(res.body!.toString("utf8")) as { error: { type: string; code: string; message: string } };
      return { status: res.statusCode, code: body.error.code, detail: create(ErrorDetailSchema, body.error), res };
    }
    case "connect": {
      const wire = JSON.parse(res.body!.toString("utf8")) as { code: string };
      const decoded = errorFromJsonBytes(res.body!, undefined, new ConnectError("undecodable", Code.Unknown));
      return { status: res.statusCode, code: wire.code, detail: decoded.findDetails(ErrorDetailSchema)[0], res };
    }
    case "grpc":
    case "grpc-web": {
      const decoded = findTrailerError(new Headers([...res.headers]));
      return { status: res.statusCode, code: decoded!.code, detail: decoded!.findDetails(ErrorDetailSchema)[0], res };
    }
  }
}

describe("the error catalogue", () => {
  it("has exactly the documented codes", () => {
    expect(Object.keys(errorCatalogue).sort()).toEqual([...codes].sort());
  });

  it.each(codes)("%s has its documented HTTP status, type and Connect code", (code) => {
    const [httpStatus, type, connectCode] = documented[code];
    expect(errorCatalogue[code]).toEqual({ type, httpStatus, connectCode });
  });
});

describe.each(codes)("%s on every protocol", (code) => {
  const [httpStatus, type, connectCode, connectName, connectStatus] = documented[code];
  const message = `Something about ${code} (field customer_id)`;
  const error = documentedError(new ApiError(code, message));
  const detail = create(ErrorDetailSchema, { type, code, message });

  it("is a ConnectError of its Connect code carrying the ErrorDetail", () => {
    expect({ code: error.code, rawMessage: error.rawMessage, details: error.findDetails(ErrorDetailSchema) }).toEqual({
      code: connectCode,
      rawMessage: message,
      details: [detail],
    });
    expect(documentedCodeOf(error)).toBe(code);
  });

  it(`REST: HTTP ${httpStatus} with {error: {type, code, message}}`, () => {
    expect(toRestError(error)).toEqual({ status: httpStatus, body: { error: { type, code, message } } });
    const { status, res } = received("rest", error);
    expect(status).toBe(httpStatus);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(JSON.parse(res.body!.toString("utf8"))).toEqual({ error: { type, code, message } });
  });

  it(`Connect: HTTP ${connectStatus}, code ${connectName}, the ErrorDetail`, () => {
    expect(received("connect", error)).toMatchObject({ status: connectStatus, code: connectName, detail });
  });

  it.each(["grpc", "grpc-web"] as const)(`%s: HTTP 200, status ${connectCode} in the headers, the ErrorDetail`, (protocol) => {
    const answer = received(protocol, error);
    expect(answer).toMatchObject({ status: 200, code: connectCode, detail });
    expect(answer.res.headers.get("content-type")).toBe(protocol === "grpc" ? "application/grpc+proto" : "application/grpc-web+proto");
    expect(answer.res.body!.length).toBe(0);
  });
});

describe("toConnectError", () => {
  it("keeps a documented error as it is, naming the request in a copy", () => {
    const documentedAlready = documentedError(new ApiError("HE_02", "Payment not found: pay_1"));
    documentedAlready.metadata.set("retry-after", "1");
    const named = toConnectError(documentedAlready, "req_1");
    expect(named.findDetails(ErrorDetailSchema)).toEqual([
      create(ErrorDetailSchema, { type: "invalid_request", code: "HE_02", message: "Payment not found: pay_1", requestId: "req_1" }),
    ]);
    expect({ code: named.code, message: named.rawMessage, retryAfter: named.metadata.get("retry-after") }).toEqual({
      code: Code.NotFound,
      message: "Payment not found: pay_1",
      retryAfter: "1",
    });
    expect(documentedAlready.findDetails(ErrorDetailSchema)[0]?.requestId).toBe("");
    expect(toRestError(named).body.error.request_id).toBe("req_1");
  });

  it("turns connect's unimplemented (a method not built yet) into IR_00", () => {
    const error = toConnectError(new ConnectError("paymentservice.v1.EventService.ListEvents is not implemented", Code.Unimplemented));
    expect(error.code).toBe(Code.Unimplemented);
    expect(error.findDetails(ErrorDetailSchema)).toEqual([
      create(ErrorDetailSchema, {
        type: "invalid_request",
        code: "IR_00",
        message: "paymentservice.v1.EventService.ListEvents is not implemented: this operation is not available yet",
      }),
    ]);
    expect(toRestError(error).status).toBe(501);
  });

  it.each([
    ["an Error", new Error("connection to db-1.internal refused (password hunter2)")],
    ["a TypeError", new TypeError("Cannot read properties of undefined (reading 'amount')")],
    ["a ConnectError without an ErrorDetail", new ConnectError("socket hang up on db-1.internal", Code.Internal)],
    ["connect's own deadline error", new ConnectError("the operation timed out", Code.DeadlineExceeded)],
    [
      "a ConnectError of a code that is not ours",
      new ConnectError("odd", Code.NotFound, undefined, [
        { desc: ErrorDetailSchema, value: create(ErrorDetailSchema, { code: "XX_99", type: "x", message: "odd" }) },
      ]),
    ],
    ["a string", "db-1.internal is down"],
    ["undefined", undefined],
  ])("turns %s into HE_00 quoting the request id and nothing of the cause", (_, reason) => {
    const error = toConnectError(reason, "req_abc");
    const message = "Something went wrong on our side; the request may be retried (request req_abc).";
    expect(error.code).toBe(Code.Internal);
    expect(error.rawMessage).toBe(message);
    expect(error.findDetails(ErrorDetailSchema)).toEqual([
      create(ErrorDetailSchema, { type: "api_error", code: "HE_00", message, requestId: "req_abc" }),
    ]);
    expect(error.cause).toBe(reason);
    expect(toRestError(error)).toEqual({
      status: 500,
      body: { error: { type: "api_error", code: "HE_00", message, request_id: "req_abc" } },
    });
  });

  it("leaves the request id out of HE_00 when there is none", () => {
    expect(toConnectError(new Error("x")).rawMessage).toBe("Something went wrong on our side; the request may be retried.");
  });

  it("answers a ConnectError with no documented code as HE_00 on REST", () => {
    expect(toRestError(new ConnectError("raw", Code.NotFound))).toEqual({
      status: 500,
      body: { error: { type: "api_error", code: "HE_00", message: "raw" } },
    });
  });
});

describe("what an error message may carry", () => {
  it.each(["rest", "connect", "grpc", "grpc-web"] as const)("%s: a card number an ApiError quoted is redacted", (protocol) => {
    const answer = received(protocol, toConnectError(new ApiError("IR_02", "Unrecognized request URL: GET /payments/4242424242424242")));
    expect(answer.detail?.message).toBe("Unrecognized request URL: GET /payments/[redacted]");
    expect(answer.res.body!.toString("utf8") + [...answer.res.headers.values()].join(" ")).not.toContain("4242424242424242");
  });

  it.each(["rest", "connect", "grpc", "grpc-web"] as const)("%s: a long message is cut to 1000 characters", (protocol) => {
    const answer = received(protocol, toConnectError(new ApiError("IR_06", `Unknown field: ${"k".repeat(5000)}`)));
    expect(answer.detail?.message).toHaveLength(1000);
    expect(answer.detail?.message.endsWith("…")).toBe(true);
  });

  it.each(["connect", "grpc", "grpc-web"] as const)("%s: text beyond ASCII arrives as it was sent", (protocol) => {
    const message = "Invalid value for field name: « Zoë » 😀";
    expect(received(protocol, toConnectError(new ApiError("IR_05", message))).detail?.message).toBe(message);
  });

  it("gRPC puts the status, the message (percent-encoded only where the gRPC spec says) and the ErrorDetail in headers (a trailers-only answer)", () => {
    const { res } = received("grpc", toConnectError(new ApiError("RL_01", "Too many requests: 100% used, wait")));
    expect(res.headers.get("grpc-status")).toBe(String(Code.ResourceExhausted));
    expect(res.headers.get("grpc-message")).toBe("Too many requests: 100%25 used, wait");
    expect(res.headers.get("grpc-status-details-bin")).toMatch(/^[A-Za-z0-9+/]+=*$/);
  });
});

describe("writeError", () => {
  it.each(["rest", "connect", "grpc", "grpc-web"] as const)("%s: the error's metadata becomes response headers", (protocol) => {
    const error = toConnectError(new ApiError("RL_01", "Too many requests"));
    error.metadata.set("retry-after", "7");
    expect(received(protocol, error).res.headers.get("retry-after")).toBe("7");
  });

  it.each([
    ["rest", 415, 415],
    ["connect", 415, 415],
    ["grpc", 415, 200],
    ["grpc-web", 415, 200],
  ] as const)("%s: a status override of %s answers HTTP %s (gRPC keeps its status in the headers)", (protocol, override, status) => {
    const answer = received(protocol, toConnectError(new ApiError("IR_06", "Unsupported content type")), override);
    expect(answer.status).toBe(status);
    expect(answer.detail?.code).toBe("IR_06");
  });

  it("cuts the response when its headers are already sent: nothing more can be written", () => {
    const res = new RecordedResponse();
    res.headersSent = true;
    writeError(res.node, "rest", toConnectError(new Error("late")));
    expect({ destroyed: res.destroyed, body: res.body, headers: res.headers.size }).toEqual({
      destroyed: true,
      body: undefined,
      headers: 0,
    });
  });

  it.each([
    ["the body was read to its end", undefined, { complete: true }],
    ["a small body is left unread", undefined, { complete: false, headers: { "content-length": "1000" } }],
    ["a body of exactly 1 MiB is left unread", undefined, { complete: false, headers: { "content-length": String(1024 * 1024) } }],
    ["a body over 1 MiB is left unread", "close", { complete: false, headers: { "content-length": String(1024 * 1024 + 1) } }],
    ["a body of unknown length is left unread", "close", { complete: false, headers: {} }],
    ["its reader gave up on the body", "close", { complete: false, destroyed: true, headers: { "content-length": "10" } }],
  ])("an HTTP/1.1 error answered when %s → connection: %s", (_, connection, req) => {
    const res = new RecordedResponse(req);
    closeIfBodyUnread(res.node);
    expect(res.headers.get("connection")).toBe(connection);
    const answered = new RecordedResponse(req);
    writeError(answered.node, "rest", toConnectError(new ApiError("IR_01", "Missing api-key")));
    expect(answered.headers.get("connection")).toBe(connection);
  });
});
