import type { IncomingHttpHeaders } from "node:http";
import { constants as http2Constants } from "node:http2";
import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import { createAsyncIterable, type UniversalHandler } from "@connectrpc/connect/protocol";
import type { HeaderLookup } from "../auth/authenticate.js";
import { describeValue, invalidRequest, MethodNotAllowedError, type ApiError } from "../errors.js";
import type { Admit } from "./admission.js";
import type { ApiRouter } from "./api-router.js";
import type { ClientAddresses } from "./client-address.js";
import { withDocumentedRefusals } from "./connect-refusals.js";
import { ConnectUnaryHandler } from "./connect-unary.js";
import { DirectMethods, type NodeRequest } from "./direct-call.js";
import { GrpcUnaryHandler } from "./grpc-unary.js";
import type { CorsPolicy } from "./cors.js";
import {
  closeIfBodyUnread,
  destroyResponse,
  documentedCodeOf,
  toConnectError,
  unknownMethodError,
  writeError,
  type NodeResponse,
} from "./errors.js";
import { withSpecGrpcMessage } from "./grpc-message.js";
import type { DualProtocolHandler } from "./listener.js";
import { rpcProtocolOf, unservedRpcProtocolOf } from "./protocol.js";
import { callValues, RequestRecord, requestIdOf } from "./request-record.js";
import { parseRequestTarget, type RequestTarget } from "./request-target.js";
import { createRestHandler } from "./rest/handler.js";
import type { Renderings } from "./rest/renderings.js";
import { RestRouter } from "./rest/router.js";
import type { Tracing } from "./tracing.js";
import { sendStreamHeadKey } from "../stream-head.js";

/** Browser pages served beside the API (e.g. the 3DS challenge), by path prefix. */
export interface Pages {
  readonly prefix: string;
  /** `path` is the request's path, already parsed from its target. */
  readonly handler: (req: NodeRequest, res: NodeResponse, path: string) => void | Promise<void>;
}

/** What the port's request handler serves. */
export interface NodeHandlerOptions {
  readonly router: ApiRouter;
  readonly pages: readonly Pages[];
  /** Decides from the headers whether a call may run, before its body is read. */
  readonly admit: Admit;
  /** The address a request's limits are counted under (TRUSTED_PROXIES). */
  readonly clients: ClientAddresses;
  /** Cross-origin browser calls (CORS_ALLOWED_ORIGINS); absent, no response carries a CORS header. */
  readonly cors?: {
    readonly policy: CorsPolicy;
    /** Whether browsers may call a method at all (those a publishable key may call). */
    browserCallable(method: DescMethod): boolean;
  };
  /** Told of every request once it has ended, as the log is (the request metrics). */
  readonly onEnded?: (record: RequestRecord, status: number) => void;
  /** A server span per request (OpenTelemetry); absent when tracing is off, so a request costs nothing for it. */
  readonly tracing?: Tracing;
  /** What REST routes answer besides JSON when asked (a balance report as CSV). */
  readonly renderings: Renderings;
}

/**
 * The one request handler of the port, and the one place nothing a client sends can escape: every
 * request is served inside a promise whose failure is answered with the documented error of the
 * request's protocol (HE_00 carrying the request id when the failure is ours), and logged once when
 * the request ends. RPC paths (`/package.Service/Method`) go to connect, which speaks Connect, gRPC
 * and gRPC-Web; browser pages go to their handler; an RPC to a method not served is answered
 * `unimplemented` in its protocol; every other path is a REST path for the transcoder. A CORS
 * preflight from an allowed origin is answered before anything else. A call is admitted
 * (authenticated, rate-limited) from its headers before its body is read, and a request whose body
 * was refused unread is closed rather than read to its end.
 */
export function createNodeHandler({
  router,
  pages,
  admit,
  clients,
  cors,
  onEnded,
  tracing,
  renderings,
}: NodeHandlerOptions): DualProtocolHandler {
  const rpc = new Map<string, UniversalHandler>(router.handlers.map((h) => [h.requestPath, h]));
  const restRouter = new RestRouter(router.methods);
  const rest = createRestHandler(router.interceptors, renderings);
  const directMethods = new DirectMethods(router.methods, router.options);
  const connectUnary = new ConnectUnaryHandler(directMethods);
  const grpcUnary = new GrpcUnaryHandler(directMethods);
  // A method's access option is decoded from its descriptor on every read; it never changes.
  const callable = new Map<DescMethod, boolean>();
  const browserCallable = (method: DescMethod | undefined): boolean => {
    if (cors === undefined || method === undefined) return false;
    let known = callable.get(method);
    if (known === undefined) {
      known = cors.browserCallable(method);
      callable.set(method, known);
    }
    return known;
  };

  function clientOf(req: NodeRequest): string {
    return clients.of(req.socket.remoteAddress, req.headers["x-forwarded-for"]);
  }

  /** Lets the browser read the answer to a call, error or not, when its origin and the method allow it. */
  function allowBrowser(req: NodeRequest, res: NodeResponse, method: DescMethod): void {
    for (const [name, value] of cors?.policy.responseHeaders(nodeHeaders(req.headers), browserCallable(method)) ?? []) {
      res.setHeader(name, value);
    }
  }

  /**
   * Answers a preflight 204 at once, before authentication and rate limiting: a browser never sends
   * an API key with one. It asks about the RPC at its path, or the REST route of the method it names.
   */
  function answerPreflight(req: NodeRequest, res: NodeResponse, record: RequestRecord): void {
    const target = parseRequestTarget(req.url);
    const requested = req.headers["access-control-request-method"] ?? "";
    let method: DescMethod | undefined;
    if (target !== undefined) {
      method = rpc.get(target.path)?.method;
      method ??= restRouter.find(requested, target.path)?.method;
    }
    if (method !== undefined) record.procedure = procedureOf(method.parent.typeName, method.name);
    for (const [name, value] of cors!.policy.preflightHeaders(nodeHeaders(req.headers), browserCallable(method)))
      res.setHeader(name, value);
    // A preflight has no body; one that declares one anyway is not read to its end.
    if (req.headers["content-length"] !== undefined || req.headers["transfer-encoding"] !== undefined) closeIfBodyUnread(res);
    res.statusCode = 204;
    res.end();
  }

  async function serve(req: NodeRequest, res: NodeResponse, record: RequestRecord): Promise<void> {
    if (cors?.policy.answersPreflight(req.method, nodeHeaders(req.headers))) return answerPreflight(req, res, record);
    const target = parseRequestTarget(req.url);
    if (target === undefined) throw invalidRequest("The request target is not a path this service serves");
    const handler = rpc.get(target.path);
    if (handler !== undefined) return serveRpc(req, res, target, handler, record);
    const page = pages.find((p) => target.path.startsWith(p.prefix));
    if (page !== undefined) {
      // The rest of a page's path is the token that authorizes it: not for the log.
      record.procedure = page.prefix;
      return page.handler(req, res, target.path);
    }
    const unservedProtocol = unservedRpcProtocolOf(req.method, req.headers["content-type"], target);
    if (unservedProtocol !== undefined) {
      record.protocol = unservedProtocol;
      // Connect has no status of its own for an unknown procedure: 404, as connect-go's mux answers.
      return refuse(res, record, unknownMethodError(req.method ?? "", target.path), unservedProtocol === "connect" ? 404 : undefined);
    }
    return serveRest(req, res, target, record);
  }

  async function serveRest(req: NodeRequest, res: NodeResponse, target: RequestTarget, record: RequestRecord): Promise<void> {
    const match = restRouter.match(req.method ?? "", target.path);
    record.procedure = procedureOf(match.route.method.parent.typeName, match.route.method.name);
    allowBrowser(req, res, match.route.method);
    const admitted = await admit(match.route.method, nodeHeaders(req.headers), clientOf(req));
    record.caller = admitted.caller;
    for (const [name, value] of admitted.header) res.setHeader(name, value);
    await rest({ match, target, req, res, record, values: callValues(record, admitted.caller) });
  }

  async function serveRpc(
    req: NodeRequest,
    res: NodeResponse,
    target: RequestTarget,
    handler: UniversalHandler,
    record: RequestRecord,
  ): Promise<void> {
    record.procedure = handler.requestPath;
    allowBrowser(req, res, handler.method);
    const protocol = rpcProtocolOf(req.method, req.headers["content-type"]);
    record.protocol = protocol ?? "connect";
    if (protocol === undefined) {
      // An OPTIONS (a preflight from an origin not allowed, or none configured) or another method the
      // RPC never takes says no protocol: the method is what is wrong, as on a REST path.
      if (!handler.allowedMethods.includes(req.method ?? "")) {
        return refuse(res, record, new MethodNotAllowedError(req.method ?? "", handler.requestPath, handler.allowedMethods));
      }
      const { error, status } = unsupportedContentType(req);
      return refuse(res, record, error, status);
    }
    const refusal = rpcRequestRefusal(req, target, handler);
    if (refusal !== undefined) return refuse(res, record, refusal.error, refusal.status);
    const admitted = await admit(handler.method, nodeHeaders(req.headers), clientOf(req));
    record.caller = admitted.caller;
    for (const [name, value] of admitted.header) res.setHeader(name, value);
    const values = callValues(record, admitted.caller);
    if (protocol === "connect" && connectUnary.accepts(req, handler.method)) {
      return connectUnary.serve({ method: handler.method, req, res, record, values });
    }
    const viaConnect = async (body?: Uint8Array): Promise<void> => {
      // Only a stream has a head to send before its first message: a unary call's comes with its answer.
      if (handler.method.methodKind !== "unary") values.set(sendStreamHeadKey, (header) => sendHeadNow(res, header));
      const request = universalRequestFromNodeRequest(req, res, undefined, values);
      const answer = await handler(body === undefined ? request : { ...request, body: createAsyncIterable([body]) });
      // Connect answers once it has read the request, or has given up reading it (a refusal).
      closeIfBodyUnread(res);
      const documented = await withDocumentedRefusals(answer, protocol, { httpMethod: req.method, method: handler.method }, record);
      await universalResponseToNodeResponse(protocol === "grpc" ? withSpecGrpcMessage(documented) : documented, res);
    };
    if (protocol === "grpc" && grpcUnary.accepts(req, handler.method)) {
      return grpcUnary.serve({ method: handler.method, req, res, record, values, viaConnect });
    }
    return viaConnect();
  }

  return (req, res) => {
    const record = new RequestRecord(requestIdOf(req.headers["x-request-id"]));
    res.setHeader("x-request-id", record.id);
    // Answers carry client secrets, API keys and payments: no cache keeps them, and no browser reads
    // one as anything but the type it is declared as. Pages that may be cached say so themselves.
    res.setHeader("cache-control", "no-store");
    res.setHeader("x-content-type-options", "nosniff");
    const span = tracing?.begin(req.method, req.headers, record);
    res.once("finish", () => resetUnreadStream(req));
    res.once("close", () => {
      record.log(req.method, req.url ?? "", res.statusCode, res.writableFinished);
      span?.end(res.statusCode);
      onEnded?.(record, res.statusCode);
    });
    const served = span === undefined ? serve(req, res, record) : span.run(() => serve(req, res, record));
    served.catch((reason: unknown) => {
      if (res.headersSent && isClientGone(reason)) destroyResponse(res);
      else refuse(res, record, reason);
    });
  };
}

/**
 * Sends a streaming call's status and headers now (connect would send them with its first message);
 * connect's own writeHead, once that message comes, then has nothing left to do.
 */
function sendHeadNow(res: NodeResponse, header: Headers): void {
  if (res.headersSent) return;
  res.writeHead(200, Object.fromEntries(header));
  // HTTP/1.1 holds a head back until the body's first write; HTTP/2 sends it in writeHead.
  if ("flushHeaders" in res) res.flushHeaders();
  res.writeHead = (() => res) as typeof res.writeHead;
}

/** A refusal of the port's own, with the HTTP status when HTTP has a more precise one than the code's. */
interface Refusal {
  readonly error: ApiError;
  readonly status?: number;
}

function unsupportedContentType(req: NodeRequest): Refusal {
  const contentType = req.headers["content-type"] ?? "(none)";
  return {
    error: invalidRequest(
      `Unsupported content type ${contentType} for an RPC; use application/json or application/proto (Connect), application/grpc or application/grpc-web`,
    ),
    status: 415,
  };
}

/**
 * What connect would answer without the documented body, or could not answer at all, refused here
 * before the call is admitted: an HTTP method or content type the RPC does not take, a Connect GET
 * without a known encoding, no usable Host (connect cannot build the request's URL), and a
 * bidirectional stream over HTTP/1.1.
 */
function rpcRequestRefusal(req: NodeRequest, target: RequestTarget, handler: UniversalHandler): Refusal | undefined {
  if (!handler.allowedMethods.includes(req.method ?? "")) {
    return { error: new MethodNotAllowedError(req.method ?? "", handler.requestPath, handler.allowedMethods) };
  }
  if (req.method !== "GET" && !handler.supportedContentType(req.headers["content-type"] ?? "")) return unsupportedContentType(req);
  const encoding = target.query.get("encoding");
  if (req.method === "GET" && encoding !== "json" && encoding !== "proto") {
    return {
      error: invalidRequest(`A Connect GET needs the query parameter encoding=json or encoding=proto, got ${describeValue(encoding)}`),
      status: 415,
    };
  }
  if (!hasValidAuthority(req)) return { error: invalidRequest("The request has no valid Host header (or :authority)") };
  if (handler.method.methodKind === "bidi_streaming" && req.httpVersion.startsWith("1.")) {
    return { error: invalidRequest(`${handler.requestPath} streams both ways, which needs HTTP/2`) };
  }
  return undefined;
}

/** Answers a request the port refuses (or fails), in its protocol's shape, and notes the outcome. */
function refuse(res: NodeResponse, record: RequestRecord, reason: unknown, status?: number): void {
  const error = toConnectError(reason, record.id);
  record.answered(documentedCodeOf(error), error.cause ?? reason);
  if (reason instanceof MethodNotAllowedError && !res.headersSent) {
    res.setHeader("allow", reason.allowed.join(", "));
    // On an RPC path too: IR_03's Connect code (unimplemented) would make it HTTP 501.
    status ??= 405;
  }
  writeError(res, record.protocol, error, status);
}

/** `/package.Service/Method`, as connect names a procedure. */
function procedureOf(service: string, method: string): string {
  return `/${service}/${method}`;
}

/** Node's request headers as authentication reads them. */
function nodeHeaders(headers: IncomingHttpHeaders): HeaderLookup {
  return {
    get(name) {
      const value = headers[name];
      return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value;
    },
  };
}

/**
 * Whether connect can build the request's URL from its authority: an HTTP/1.0 request may come
 * without a Host header, and a Host header need not be a host, and connect throws on either.
 */
function hasValidAuthority(req: NodeRequest): boolean {
  const authority = "authority" in req ? req.authority : req.headers.host;
  return authority !== undefined && authority !== "" && URL.canParse(`http://${authority}`);
}

/** A write to a client that went away (connect-node reports it as canceled or aborted). */
function isClientGone(reason: unknown): boolean {
  return reason instanceof ConnectError && (reason.code === Code.Canceled || reason.code === Code.Aborted);
}

/**
 * Stops an HTTP/2 request whose answer is complete though its body is not (a refusal before or
 * while reading it) with RST_STREAM NO_ERROR, as RFC 9113 §8.1 allows a server that has answered,
 * instead of reading the rest to discard it. HTTP/1.1 answers close their connection instead
 * (closeIfBodyUnread).
 */
function resetUnreadStream(req: NodeRequest): void {
  if ("stream" in req && !req.stream.endAfterHeaders && !req.readableEnded && !req.stream.closed) {
    req.stream.close(http2Constants.NGHTTP2_NO_ERROR);
  }
}
