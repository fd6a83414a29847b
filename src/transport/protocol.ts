import { contentTypeRegExp as connectContentType } from "@connectrpc/connect/protocol-connect";
import { contentTypeRegExp as grpcContentType } from "@connectrpc/connect/protocol-grpc";
import { contentTypeRegExp as grpcWebContentType } from "@connectrpc/connect/protocol-grpc-web";
import type { RequestTarget } from "./request-target.js";

/**
 * The protocol a request speaks, which decides the shape of every answer to it, errors included:
 * the REST dialect on the documented paths, and the three RPC protocols on `/package.Service/Method`.
 */
export type WireProtocol = "rest" | RpcProtocol;

/** The protocols connect serves on RPC paths. */
export type RpcProtocol = "connect" | "grpc" | "grpc-web";

/**
 * The RPC protocol a request to an RPC path speaks, by its HTTP method and content type (a Connect
 * GET carries none); undefined when the content type names none of them, which is then answered in
 * Connect's shape, the one a plain HTTP client can read.
 */
export function rpcProtocolOf(httpMethod: string | undefined, contentType: string | undefined): RpcProtocol | undefined {
  if (httpMethod === "GET") return "connect";
  if (contentType === undefined) return undefined;
  // gRPC-Web's content types begin like gRPC's, so they are told apart first. Its base64 text
  // variant (for browsers without binary fetch) is one connect does not serve.
  if (grpcWebContentType.test(contentType)) return /^application\/grpc-web-text/i.test(contentType) ? undefined : "grpc-web";
  if (grpcContentType.test(contentType)) return "grpc";
  if (connectContentType.test(contentType)) return "connect";
  return undefined;
}

/**
 * `/package.Service/Method`: the shape of an RPC path. No REST path has it, since a REST path
 * begins with a resource name, never a dotted package.
 */
const procedurePath = /^\/[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\/[A-Za-z_]\w*$/;

/**
 * The RPC protocol of a request to a path no method is served at, when it speaks one, so that it is
 * answered with that protocol's `unimplemented` rather than a REST 404 its client cannot read: any
 * gRPC or gRPC-Web request (their clients never speak REST), and a Connect request (a POST with a
 * Connect content type, or a GET with `connect=v1`) to a path shaped like a procedure. Undefined
 * for a REST request, which REST answers (404 IR_02 for a path it does not know).
 */
export function unservedRpcProtocolOf(
  httpMethod: string | undefined,
  contentType: string | undefined,
  target: RequestTarget,
): RpcProtocol | undefined {
  const isProcedure = procedurePath.test(target.path);
  if (httpMethod === "GET") return isProcedure && target.query.get("connect") === "v1" ? "connect" : undefined;
  const protocol = rpcProtocolOf(httpMethod, contentType);
  if (protocol === "connect" && !isProcedure) return undefined;
  return protocol;
}
