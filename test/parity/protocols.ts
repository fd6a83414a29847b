import type { DescMethod, JsonValue, Message } from "@bufbuild/protobuf";
import { ConnectError, type Transport } from "@connectrpc/connect";
import { compressionGzip, createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { createAsyncIterable } from "@connectrpc/connect/protocol";
import { ErrorDetailSchema } from "../../gen/paymentservice/v1/error_pb.js";
import type { HttpRule } from "../../gen/google/api/http_pb.js";
import { writeMessage } from "../../src/rest-json/codec.js";

/*
 * Every way a client reaches an RPC, each as one call that sends a request message with row headers
 * and returns what came back in one shape: the answer's messages (RPC) or JSON (REST), its headers,
 * or its error as the documented fields every protocol carries.
 */

/** A documented error as a client reads it, whatever the protocol. */
export interface ReadError {
  readonly code: string | undefined;
  readonly type: string | undefined;
  readonly message: string | undefined;
  /** Whether the error names the request as its X-Request-Id header does. */
  readonly namesItsRequest: boolean;
  /** The HTTP status (REST) or Connect code (RPC) it came with. */
  readonly status: number;
}

/** What one call came to. */
export type Outcome =
  | { readonly ok: true; readonly header: Headers; readonly messages: readonly Message[]; readonly json?: undefined }
  | { readonly ok: true; readonly header: Headers; readonly json: JsonValue; readonly messages?: undefined }
  | { readonly ok: false; readonly header: Headers; readonly error: ReadError; readonly messages: readonly Message[] };

/** An RPC protocol, codec and compression a client may choose, with the transport that speaks it. */
export interface RpcWay {
  readonly name: string;
  transport(baseUrl: string): Transport;
  /** The call's deadline, sent as `connect-timeout-ms` or `grpc-timeout`. */
  readonly timeoutMs?: number;
}

/** Small answers are compressed too: connect's default leaves those under 1 KiB alone. */
const gzip = { sendCompression: compressionGzip, acceptCompression: [compressionGzip], compressMinBytes: 0 };

/**
 * The RPC ways: Connect with each codec, over both HTTP versions, compressed, and by GET (which
 * connect's client uses only for side-effect-free methods); gRPC plain and compressed; gRPC-Web
 * with each codec; with and without a deadline. The plain Connect and gRPC calls take the port's
 * direct unary path (deadline or not), the compressed and GET ones connect's own handler.
 */
export const rpcWays: readonly RpcWay[] = [
  { name: "Connect JSON", transport: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false }) },
  { name: "Connect binary", transport: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true }) },
  {
    name: "Connect JSON over HTTP/2",
    transport: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: false }),
  },
  {
    name: "Connect binary, gzip",
    transport: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true, ...gzip }),
  },
  {
    name: "Connect GET where allowed",
    transport: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false, useHttpGet: true }),
  },
  {
    name: "Connect binary with a deadline",
    transport: (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true }),
    timeoutMs: 60_000,
  },
  { name: "gRPC", transport: (baseUrl) => createGrpcTransport({ baseUrl }) },
  { name: "gRPC with a deadline", transport: (baseUrl) => createGrpcTransport({ baseUrl }), timeoutMs: 60_000 },
  { name: "gRPC, gzip", transport: (baseUrl) => createGrpcTransport({ baseUrl, ...gzip }) },
  { name: "gRPC-Web binary", transport: (baseUrl) => createGrpcWebTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true }) },
  { name: "gRPC-Web JSON", transport: (baseUrl) => createGrpcWebTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false }) },
];

/** Calls `method` the RPC way `way`; a stream's messages are read to its end or its error. */
export async function callRpc(
  way: RpcWay,
  baseUrl: string,
  method: DescMethod,
  request: Message,
  header: Record<string, string>,
): Promise<Outcome> {
  const transport = way.transport(baseUrl);
  const messages: Message[] = [];
  let responseHeader = new Headers();
  try {
    if (method.methodKind === "unary") {
      const answer = await transport.unary(method as never, undefined, way.timeoutMs, header, request as never);
      return { ok: true, header: answer.header, messages: [answer.message as Message] };
    }
    const answer = await transport.stream(method as never, undefined, way.timeoutMs, header, createAsyncIterable([request]) as never);
    responseHeader = answer.header;
    for await (const message of answer.message) messages.push(message as Message);
    return { ok: true, header: answer.header, messages };
  } catch (reason) {
    const error = ConnectError.from(reason);
    const detail = error.findDetails(ErrorDetailSchema)[0];
    return {
      ok: false,
      header: method.methodKind === "unary" ? error.metadata : responseHeader,
      messages,
      error: {
        code: detail?.code,
        type: detail?.type,
        message: detail?.message,
        namesItsRequest: detail !== undefined && detail.requestId !== "" && detail.requestId === error.metadata.get("x-request-id"),
        status: error.code,
      },
    };
  }
}

/** One REST binding of a method, from its google.api.http rule or an additional binding. */
export interface RestWay {
  readonly name: string;
  readonly httpMethod: string;
  readonly template: string;
  /** Whether the request travels as a JSON body ("*") or in the path and query (""). */
  readonly hasBody: boolean;
}

/** The REST ways of a method's rules. */
export function restWays(rules: readonly HttpRule[]): RestWay[] {
  return rules.flatMap((rule) => {
    const { pattern } = rule;
    if (pattern.case === undefined || pattern.case === "custom") return [];
    const httpMethod = pattern.case.toUpperCase();
    return [{ name: `REST ${httpMethod} ${pattern.value}`, httpMethod, template: pattern.value, hasBody: rule.body === "*" }];
  });
}

/**
 * Calls `method` over a REST binding as a web backend would: the path variables in the path, the
 * other fields in the JSON body or, without one, in the query string, in the REST dialect, with no
 * null for a field the request does not set.
 */
export async function callRest(
  baseUrl: string,
  way: RestWay,
  method: DescMethod,
  request: Message,
  header: Record<string, string>,
): Promise<Outcome> {
  const json = writeMessage(request, method.input);
  const pathFields = new Set<string>();
  const path = way.template.replace(/\{([a-z_0-9]+)\}/g, (_, name: string) => {
    pathFields.add(name);
    return encodeURIComponent(String(json[name]));
  });
  const fields = Object.entries(json).filter(([name, value]) => value !== null && !pathFields.has(name));
  let target = path;
  let body: string | undefined;
  if (way.hasBody) body = JSON.stringify(Object.fromEntries(fields));
  else {
    const query = new URLSearchParams();
    for (const [name, value] of fields) {
      for (const item of Array.isArray(value) ? value : [value]) query.append(name, String(item));
    }
    if (query.size > 0) target += `?${query}`;
  }
  const response = await fetch(baseUrl + target, {
    method: way.httpMethod,
    headers: { ...header, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body,
  });
  const answer = (await response.json()) as JsonValue;
  if (response.status === 200) return { ok: true, header: response.headers, json: answer };
  const error = (answer as { error?: Record<string, JsonValue> }).error ?? {};
  return {
    ok: false,
    header: response.headers,
    messages: [],
    error: {
      code: error.code as string | undefined,
      type: error.type as string | undefined,
      message: error.message as string | undefined,
      namesItsRequest: error.request_id !== undefined && error.request_id === response.headers.get("x-request-id"),
      status: response.status,
    },
  };
}
