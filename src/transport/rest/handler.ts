import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import type { DualProtocolHandler } from "../listener.js";
import { Code, ConnectError, createContextValues, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { invokeUnaryImplementation } from "@connectrpc/connect/protocol";
import { ApiError, invalidRequest } from "../../errors.js";
import { log } from "../../log.js";
import { restErrorOf, toConnectError, toRestError } from "../errors.js";
import { protocolKey } from "../protocol.js";
import { readMessage, writeMessage } from "./codec.js";
import { applyPathVariables, applyQuery } from "./params.js";
import { MethodNotAllowedError, type RestRouter, type RouteMatch } from "./router.js";

/** Largest REST body accepted; payment requests are a few kilobytes. */
const maxBodyBytes = 1024 * 1024;

/** Request headers that describe the REST transfer itself and must not reach the RPC. */
const transferHeaders = new Set(["content-type", "content-length", "content-encoding", "accept-encoding", "transfer-encoding", "connection", "host", "keep-alive", "te", "upgrade"]);

/**
 * Serves the documented JSON REST paths by transcoding each request into a call of the very
 * implementation that serves Connect and gRPC, through the same interceptors, so authentication,
 * limits, idempotency, logging and errors behave identically whatever the protocol.
 */
export function createRestHandler(router: RestRouter, interceptors: Interceptor[]): DualProtocolHandler {
  return (req, res) => {
    const url = new URL(req.url ?? "/", "http://rest.invalid");
    let match: RouteMatch;
    try {
      match = router.match(req.method ?? "GET", url.pathname);
    } catch (reason) {
      respondWithError(res, reason, req.method, url.pathname);
      return;
    }
    transcode(match, interceptors, url, req, res).catch((reason: unknown) => respondWithError(res, reason, req.method, url.pathname));
  };
}

async function transcode(
  { route, variables }: RouteMatch,
  interceptors: Interceptor[],
  url: URL,
  req: IncomingMessage | Http2ServerRequest,
  res: ServerResponse | Http2ServerResponse,
): Promise<void> {
  const body = await readBody(req);
  const request = readMessage(route.method.input, route.body === "*" ? (body ?? {}) : {});
  if (route.body === "" && body !== undefined && (typeof body !== "object" || body === null || Object.keys(body).length > 0)) {
    throw invalidRequest(`${route.httpMethod} ${route.template} takes no request body`);
  }
  if (route.body === "") {
    applyQuery(request, url.searchParams);
  } else if (url.search !== "") {
    throw invalidRequest(`${route.httpMethod} ${route.template} takes its parameters in the JSON body, not the query string`);
  }
  applyPathVariables(request, route.variables, variables);

  const header: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined && !name.startsWith(":") && !transferHeaders.has(name)) {
      header[name] = Array.isArray(value) ? value.join(", ") : value;
    }
  }
  const ended = new AbortController();
  const context: HandlerContext = {
    service: route.method.parent,
    method: route.method,
    protocolName: "rest",
    requestMethod: route.httpMethod,
    url: url.href,
    // Aborted when the call ends, as connect does; not when the client goes away: a call runs to
    // completion, so an operation on money is never cut off halfway (its outcome stays available
    // to a retry with its idempotency key). No deadline: REST has no timeout header.
    signal: ended.signal,
    timeoutMs: () => undefined,
    requestHeader: new Headers(header),
    responseHeader: new Headers(),
    responseTrailer: new Headers(),
    values: createContextValues().set(protocolKey, "rest"),
  };
  try {
    const output = await invokeUnaryImplementation(route.spec, context, request.message, interceptors);
    ended.abort(callCompleted);
    copyHeaders(context.responseHeader, res);
    send(res, 200, writeMessage(output, route.method.output));
  } catch (reason) {
    ended.abort(reason);
    const error = toConnectError(reason);
    copyHeaders(context.responseHeader, res);
    copyHeaders(error.metadata, res);
    const { status, body: errorBody } = toRestError(error);
    send(res, status, errorBody);
  }
}

/**
 * Why a call's context is aborted when it completes: given as the reason, it spares building a
 * DOMException for every request. (The context is built here rather than by connect's
 * createHandlerContext, whose linked deadline and request signals cost a few per cent of a
 * payment's CPU and mean nothing for REST.)
 */
const callCompleted = new ConnectError("the call completed", Code.Canceled);

/** Response headers an interceptor or implementation set (rate limits, Idempotent-Replayed, …). */
function copyHeaders(header: Headers, res: ServerResponse | Http2ServerResponse): void {
  header.forEach((value, name) => res.setHeader(name, value));
}

function readBody(req: IncomingMessage | Http2ServerRequest): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = (): void => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
    };
    const onError = (error: Error): void => {
      stop();
      reject(error);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      chunks.push(chunk);
      if (size > maxBodyBytes) onError(invalidRequest(`The request body is larger than ${maxBodyBytes} bytes`));
    };
    const onEnd = (): void => {
      stop();
      const text = (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).toString("utf8").trim();
      if (text === "") {
        resolve(undefined);
        return;
      }
      try {
        resolve(JSON.parse(text) as unknown);
      } catch {
        reject(invalidRequest("The request body is not valid JSON"));
      }
    };
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
  });
}

function respondWithError(
  res: ServerResponse | Http2ServerResponse,
  reason: unknown,
  method: string | undefined,
  path: string,
): void {
  let error: ApiError;
  if (reason instanceof ApiError) {
    error = reason;
    log.info("rest request rejected", { method, path, code: error.code });
  } else {
    error = new ApiError("HE_00", "Something went wrong on our side; the request may be retried.");
    log.error("rest transcoding failed", { method, path, cause: reason instanceof Error ? (reason.stack ?? reason.message) : String(reason) });
  }
  if (error instanceof MethodNotAllowedError && !res.headersSent) {
    res.setHeader("allow", error.allowed.join(", "));
  }
  const { status, body } = restErrorOf(error);
  send(res, status, body);
}

function send(res: ServerResponse | Http2ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const payload = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader("content-type", "application/json");
  res.setHeader("content-length", Buffer.byteLength(payload));
  res.end(payload);
}
