import * as http2 from "node:http2";
import * as net from "node:net";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { trailerParse } from "@connectrpc/connect/protocol-grpc-web";
import { ErrorDetailSchema, type ErrorDetail } from "../../gen/paymentservice/v1/error_pb.js";

/*
 * Requests no well-behaved client would send — malformed HTTP, hand-made gRPC frames — for the
 * suites that check the service answers them properly. Typed clients cannot send these.
 */

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
}

/** Writes `request` as it is to a new connection and collects what the server sends until it closes the connection or `waitMs` pass. */
export function rawHttp1(baseUrl: string, request: string | Buffer, waitMs = 2_000): Promise<RawAnswer> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    let closed = false;
    const finish = (): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(parseAnswer(Buffer.concat(chunks).toString("latin1"), closed));
    };
    const timer = setTimeout(finish, waitMs);
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", () => undefined);
    socket.on("close", () => {
      closed = true;
      finish();
    });
    socket.write(request);
  });
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

/** A gRPC / gRPC-Web message frame: flags, a big-endian length (`declared`, else the payload's) and the payload. */
export function frame(payload: Uint8Array, flags = 0, declared = payload.byteLength): Buffer {
  const bytes = Buffer.alloc(5 + payload.byteLength);
  bytes[0] = flags;
  bytes.writeUInt32BE(declared, 1);
  bytes.set(payload, 5);
  return bytes;
}

/** The status of a gRPC or gRPC-Web answer, with the documented ErrorDetail it carries. */
export interface GrpcAnswer {
  readonly httpStatus: number;
  readonly grpcStatus: number | undefined;
  readonly message: string | undefined;
  readonly detail: ErrorDetail | undefined;
  readonly headers: Headers;
}

function grpcAnswer(httpStatus: number, headers: Headers, trailer: Headers): GrpcAnswer {
  const status = trailer.get("grpc-status") ?? headers.get("grpc-status");
  const error = findTrailerError(trailer.has("grpc-status") ? trailer : headers);
  return {
    httpStatus,
    grpcStatus: status === null ? undefined : Number(status),
    message: error?.rawMessage,
    detail: error?.findDetails(ErrorDetailSchema)[0],
    headers,
  };
}

/** A unary gRPC call over HTTP/2 prior knowledge with a hand-made body. */
export function grpcRaw(baseUrl: string, procedure: string, body: Uint8Array, header: Record<string, string> = {}): Promise<GrpcAnswer> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(baseUrl);
    session.on("error", reject);
    const stream = session.request({ ":method": "POST", ":path": procedure, "content-type": "application/grpc", te: "trailers", ...header });
    const headers = new Headers();
    const trailer = new Headers();
    let httpStatus = 0;
    stream.on("response", (h) => {
      httpStatus = Number(h[":status"]);
      for (const [name, value] of Object.entries(h)) if (!name.startsWith(":") && value !== undefined) headers.set(name, String(value));
    });
    stream.on("trailers", (t) => {
      for (const [name, value] of Object.entries(t)) if (value !== undefined) trailer.set(name, String(value));
    });
    stream.on("data", () => undefined);
    stream.on("error", reject);
    stream.on("close", () => {
      session.close();
      resolve(grpcAnswer(httpStatus, headers, trailer));
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
  const bytes = Buffer.from(await res.arrayBuffer());
  let trailer = new Headers();
  for (let at = 0; at + 5 <= bytes.length; ) {
    const length = bytes.readUInt32BE(at + 1);
    if (bytes[at] === 0x80) trailer = trailerParse(bytes.subarray(at + 5, at + 5 + length));
    at += 5 + length;
  }
  return grpcAnswer(res.status, res.headers, trailer);
}
