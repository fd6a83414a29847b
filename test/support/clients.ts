import { connect as connectTcp } from "node:net";
import type { DescService } from "@bufbuild/protobuf";
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
  type ConnectTransportOptions,
} from "@connectrpc/connect-node";
import { Agent, fetch as fetchVia } from "undici";
import { adminApiKey } from "./service.js";

/**
 * A JSON body as the service sent it, parsed. Tests read arbitrary documented fields of it and
 * their expectations check its shape, so it is deliberately left untyped: the one `any` of the tests.
 */
// biome-ignore lint/suspicious/noExplicitAny: the shape of an answer is what the tests check, field by field
export type JsonBody = any;

/** What a REST call returned: status, headers, the body as sent (replays compare it byte for byte) and parsed. */
export interface RestResponse {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  readonly body: JsonBody;
}

/**
 * Connections from one local address: every test calls from 127.0.0.1, and a test of the limits per
 * client address calls from others of 127.0.0.0/8 as other clients would.
 */
const agents = new Map<string, Agent>();

function agentFrom(localAddress: string): Agent {
  let agent = agents.get(localAddress);
  if (agent === undefined) {
    agent = new Agent({ localAddress });
    agents.set(localAddress, agent);
  }
  return agent;
}

/** Calls a REST path with fetch, as a web backend would; `from` is the local address to call from. */
export async function rest(
  baseUrl: string,
  method: string,
  path: string,
  options: { apiKey?: string; admin?: boolean; body?: unknown; rawBody?: string; headers?: Record<string, string>; from?: string } = {},
): Promise<RestResponse> {
  const headers: Record<string, string> = { "content-type": "application/json", ...options.headers };
  if (options.apiKey !== undefined) headers["api-key"] = options.apiKey;
  if (options.admin === true) headers["admin-api-key"] = adminApiKey;
  const init = { method, headers, body: options.rawBody ?? (options.body === undefined ? undefined : JSON.stringify(options.body)) };
  const response =
    options.from === undefined
      ? await fetch(baseUrl + path, init)
      : await fetchVia(baseUrl + path, { ...init, dispatcher: agentFrom(options.from) });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, body: text === "" ? undefined : JSON.parse(text) };
}

/** The RPC protocols a typed client can speak to the service. */
export type RpcProtocol = "connect" | "grpc" | "grpc-web";

/** Headers sent on every call of a client. */
function withHeaders(headers: Record<string, string>): Interceptor {
  return (next) => (req) => {
    for (const [name, value] of Object.entries(headers)) req.header.set(name, value);
    return next(req);
  };
}

/**
 * A generated typed client over one protocol, as another service would use it; `auth.from` is the
 * local address to call from. Connect sends binary protobuf by POST, as connect-node does by default,
 * unless `connect` asks for JSON (as a browser sends) or for GET (side-effect-free methods only).
 */
export function rpcClient<S extends DescService>(
  service: S,
  baseUrl: string,
  protocol: RpcProtocol,
  auth: { apiKey?: string; admin?: boolean; from?: string } = {},
  connect: Pick<ConnectTransportOptions, "useBinaryFormat" | "useHttpGet"> = {},
): Client<S> {
  const headers: Record<string, string> = {};
  if (auth.apiKey !== undefined) headers["api-key"] = auth.apiKey;
  if (auth.admin === true) headers["admin-api-key"] = adminApiKey;
  const interceptors = [withHeaders(headers)];
  const localAddress = auth.from;
  const http1 = localAddress === undefined ? {} : { nodeOptions: { localAddress } };
  const { hostname, port } = new URL(baseUrl);
  const http2 =
    localAddress === undefined
      ? {}
      : { nodeOptions: { createConnection: () => connectTcp({ host: hostname, port: Number(port), localAddress }) } };
  const transport =
    protocol === "connect"
      ? createConnectTransport({ baseUrl, httpVersion: "1.1", interceptors, ...connect, ...http1 })
      : protocol === "grpc"
        ? createGrpcTransport({ baseUrl, interceptors, ...http2 })
        : createGrpcWebTransport({ baseUrl, httpVersion: "1.1", interceptors, ...http1 });
  return createClient(service, transport);
}
