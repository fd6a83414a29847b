import type * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { trailerParse } from "@connectrpc/connect/protocol-grpc-web";
import { ErrorDetailSchema, type ErrorDetail } from "../../gen/paymentservice/v1/error_pb.js";

/*
 * Requests no well-behaved client would send — malformed HTTP, hand-made gRPC frames — and reading
 * what comes back, for the suites that check the service answers them properly (the regression
 * suite and the fuzz suite). Typed clients cannot send these.
 */

/** How a raw exchange ended: `done` accepted what came, the server closed, the connection failed, or time ran out. */
type ExchangeEnd = { readonly by: "done" | "close" | "timeout" } | { readonly by: "error"; readonly error: NodeJS.ErrnoException };

/** What a raw exchange sends: bytes written at once, or a writer that sends them over time, as a slow client does. */
export type RawRequest = string | Uint8Array | ((socket: net.Socket) => void);

/**
 * Sends `request` on a new connection, without half-closing it (a FIN would let the server drop an
 * incomplete request silently), and collects what the server sends until `done` accepts it, the
 * server closes the connection, the connection fails, or `waitMs` pass.
 */
function exchange(
  host: string,
  port: number,
  request: RawRequest,
  waitMs: number,
  done: (received: Buffer) => boolean,
): Promise<{ received: Buffer; end: ExchangeEnd }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let settled = false;
    const socket = net.connect({ port, host, noDelay: true });
    const finish = (end: ExchangeEnd): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ received: Buffer.concat(chunks), end });
    };
    const timer = setTimeout(() => finish({ by: "timeout" }), waitMs);
    socket.on("connect", () => (typeof request === "function" ? request(socket) : socket.write(request)));
    socket.on("data", (chunk: Buffer) => {
      chunks.push(chunk);
      if (done(Buffer.concat(chunks))) finish({ by: "done" });
    });
    socket.on("close", () => finish({ by: "close" }));
    socket.on("error", (error: NodeJS.ErrnoException) => finish({ by: "error", error }));
  });
}

/** What came back on a raw HTTP/1.1 connection. */
export interface RawAnswer {
  /** Everything the server sent, as latin1 text. */
  readonly text: string;
  readonly status: number | undefined;
  readonly headers: Record<string, string>;
  /** The body parsed as JSON, when it is. */
  readonly json: unknown;
  /** Whether the server closed the connection before `waitMs` passed. */
  readonly closed: boolean;
  /** Why the connection failed (a reset, a broken pipe), when it ended so. */
  readonly error?: string;
}

/** Sends `request` as it is on a new connection and collects what the server sends until it closes the connection or `waitMs` pass. */
export async function rawHttp1(baseUrl: string, request: RawRequest, waitMs = 2_000): Promise<RawAnswer> {
  const { hostname, port } = new URL(baseUrl);
  const { received, end } = await exchange(hostname, Number(port), request, waitMs, () => false);
  // A failed connection is closed too: node follows the error with the close.
  const answer = parseAnswer(received.toString("latin1"), end.by !== "timeout");
  return end.by === "error" ? { ...answer, error: end.error.message } : answer;
}

function parseAnswer(text: string, closed: boolean): RawAnswer {
  const [head = "", body = ""] = text.split("\r\n\r\n", 2);
  const [statusLine = "", ...lines] = head.split("\r\n");
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(":");
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1];
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    json = undefined;
  }
  return { text, status: status === undefined ? undefined : Number(status), headers, json, closed };
}

/** One HTTP/1.1 response read off a raw connection, or why there is none. */
export interface Http1Response {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Buffer;
  /** Why there is no (complete) answer, if there is none. */
  readonly failure: string | undefined;
}

/**
 * Writes `bytes` to a new connection on 127.0.0.1 and reads one response, at most `deadlineMs`. When
 * the request leaves body unsent, the server must also close the connection before the deadline
 * rather than wait for the rest.
 */
export async function sendRaw(port: number, bytes: Uint8Array, leavesBodyUnsent: boolean, deadlineMs: number): Promise<Http1Response> {
  const { received, end } = await exchange(
    "127.0.0.1",
    port,
    bytes,
    deadlineMs,
    (sofar) => !leavesBodyUnsent && parseResponse(sofar, false) !== undefined,
  );
  const failed = (failure: string): Http1Response => ({ status: 0, headers: new Headers(), body: Buffer.alloc(0), failure });
  switch (end.by) {
    case "done":
      return parseResponse(received, false)!;
    case "timeout": {
      const answer = parseResponse(received, false);
      return answer === undefined
        ? failed(`no answer within ${deadlineMs} ms`)
        : { ...answer, failure: `answered ${answer.status} but kept the connection open waiting for the unsent body` };
    }
    case "close":
      return (
        parseResponse(received, true) ??
        failed(received.length === 0 ? "connection closed without an answer" : "connection closed inside an incomplete answer")
      );
    case "error":
      return parseResponse(received, true) ?? failed(`connection failed without an answer: ${end.error.code ?? end.error.message}`);
  }
}

/** One HTTP/1.1 response from the start of `bytes`, or undefined while it is incomplete. */
function parseResponse(bytes: Buffer, closed: boolean): Http1Response | undefined {
  const headEnd = bytes.indexOf("\r\n\r\n");
  if (headEnd < 0) return undefined;
  const [statusLine, ...lines] = bytes.subarray(0, headEnd).toString("latin1").split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine!)?.[1] ?? 0);
  const headers = new Headers();
  for (const line of lines) {
    const colon = line.indexOf(":");
    try {
      headers.append(line.slice(0, colon), line.slice(colon + 1).trim());
    } catch {
      // A header Headers cannot hold is still part of the answer; the callers read only known ones.
    }
  }
  const rest = bytes.subarray(headEnd + 4);
  const length = headers.get("content-length");
  if (length !== null) {
    return rest.length >= Number(length) ? { status, headers, body: rest.subarray(0, Number(length)), failure: undefined } : undefined;
  }
  if (headers.get("transfer-encoding")?.includes("chunked") === true) {
    const body = dechunk(rest);
    return body === undefined ? undefined : { status, headers, body, failure: undefined };
  }
  return closed ? { status, headers, body: rest, failure: undefined } : undefined;
}

function dechunk(bytes: Buffer): Buffer | undefined {
  const parts: Buffer[] = [];
  let offset = 0;
  for (;;) {
    const lineEnd = bytes.indexOf("\r\n", offset);
    if (lineEnd < 0) return undefined;
    const size = parseInt(bytes.subarray(offset, lineEnd).toString("latin1"), 16);
    if (Number.isNaN(size)) return Buffer.concat(parts);
    if (size === 0) return Buffer.concat(parts);
    if (lineEnd + 2 + size > bytes.length) return undefined;
    parts.push(bytes.subarray(lineEnd + 2, lineEnd + 2 + size));
    offset = lineEnd + 2 + size + 2;
  }
}

/** Node's header object as fetch's Headers, which the connect helpers read; pseudo-headers and values Headers rejects are left out. */
export function toHeaders(incoming: http.IncomingHttpHeaders | http2.IncomingHttpHeaders): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(incoming)) {
    if (name.startsWith(":") || value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [String(value)]) {
      try {
        headers.append(name, item);
      } catch {
        // A value Headers rejects is kept out; the callers read only known headers.
      }
    }
  }
  return headers;
}

/** A gRPC / gRPC-Web message frame: flags, a big-endian length (`declared`, else the payload's) and the payload. */
export function frame(payload: Uint8Array, flags = 0, declared = payload.byteLength): Buffer {
  const bytes = Buffer.alloc(5 + payload.byteLength);
  bytes[0] = flags;
  bytes.writeUInt32BE(declared, 1);
  bytes.set(payload, 5);
  return bytes;
}

/** The frames of a gRPC-Web response body, in order; an incomplete last one is dropped. */
export function readEnvelopes(body: Uint8Array): { flags: number; data: Uint8Array }[] {
  const envelopes: { flags: number; data: Uint8Array }[] = [];
  const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  let offset = 0;
  while (offset + 5 <= bytes.length) {
    const length = bytes.readUInt32BE(offset + 1);
    if (offset + 5 + length > bytes.length) break;
    envelopes.push({ flags: bytes[offset]!, data: bytes.subarray(offset + 5, offset + 5 + length) });
    offset += 5 + length;
  }
  return envelopes;
}

/** The status of a gRPC or gRPC-Web answer, with the documented ErrorDetail it carries. */
export interface GrpcAnswer {
  readonly httpStatus: number;
  readonly grpcStatus: number | undefined;
  readonly message: string | undefined;
  readonly detail: ErrorDetail | undefined;
  readonly headers: Headers;
  /** The frames of the body, trailer frames left out. */
  readonly messages: { flags: number; data: Uint8Array }[];
}

function grpcAnswer(httpStatus: number, headers: Headers, trailer: Headers, body: Uint8Array): GrpcAnswer {
  const status = trailer.get("grpc-status") ?? headers.get("grpc-status");
  const error = findTrailerError(trailer.has("grpc-status") ? trailer : headers);
  return {
    httpStatus,
    grpcStatus: status === null ? undefined : Number(status),
    message: error?.rawMessage,
    detail: error?.findDetails(ErrorDetailSchema)[0],
    headers,
    messages: readEnvelopes(body).filter((envelope) => envelope.flags !== 0x80),
  };
}

/** A unary gRPC call over HTTP/2 prior knowledge with a hand-made body. */
export function grpcRaw(baseUrl: string, procedure: string, body: Uint8Array, header: Record<string, string> = {}): Promise<GrpcAnswer> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(baseUrl);
    session.on("error", reject);
    const stream = session.request({
      ":method": "POST",
      ":path": procedure,
      "content-type": "application/grpc",
      te: "trailers",
      ...header,
    });
    let headers = new Headers();
    let trailer = new Headers();
    let httpStatus = 0;
    stream.on("response", (h) => {
      httpStatus = Number(h[":status"]);
      headers = toHeaders(h);
    });
    stream.on("trailers", (t) => {
      trailer = toHeaders(t);
    });
    const chunks: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("error", reject);
    stream.on("close", () => {
      session.close();
      resolve(grpcAnswer(httpStatus, headers, trailer, Buffer.concat(chunks)));
    });
    stream.end(body);
  });
}

/** A unary gRPC-Web call over HTTP/1.1 with a hand-made body; its trailers come as the last frame. */
export async function grpcWebRaw(
  baseUrl: string,
  procedure: string,
  body: Uint8Array,
  header: Record<string, string> = {},
): Promise<GrpcAnswer> {
  const res = await fetch(baseUrl + procedure, {
    method: "POST",
    headers: { "content-type": "application/grpc-web+proto", ...header },
    body,
  });
  const answer = new Uint8Array(await res.arrayBuffer());
  const trailers = readEnvelopes(answer).filter((envelope) => envelope.flags === 0x80);
  const last = trailers.at(-1);
  return grpcAnswer(res.status, res.headers, last === undefined ? new Headers() : trailerParse(last.data), answer);
}
