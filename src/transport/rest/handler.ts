import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import type { DualProtocolHandler } from "../listener.js";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues } from "@connectrpc/connect";
import { createAsyncIterable, readAllBytes } from "@connectrpc/connect/protocol";
import { errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import { ApiError, invalidRequest } from "../../errors.js";
import { log } from "../../log.js";
import { restErrorOf, toRestError } from "../errors.js";
import { protocolKey } from "../protocol.js";
import { readMessage, writeMessage } from "./codec.js";
import { applyPathVariables, applyQuery } from "./params.js";
import { MethodNotAllowedError, type RestRouter, type RouteMatch } from "./router.js";

/** Largest REST body accepted; payment requests are a few kilobytes. */
const maxBodyBytes = 1024 * 1024;

/** Request headers that describe the REST transfer itself and must not reach the RPC. */
const transferHeaders = new Set(["content-type", "content-length", "content-encoding", "accept-encoding", "transfer-encoding", "connection", "host", "keep-alive", "te", "upgrade"]);

/** Response headers of the inner Connect call that the REST response replaces with its own. */
const connectResponseHeaders = /^(content-|connect-|accept-encoding$|vary$)/;

/**
 * Serves the documented JSON REST paths by transcoding each request into a Connect unary call on
 * the very handler that serves Connect and gRPC, so interceptors (auth, limits, logging, errors) run
 * identically whatever the protocol.
 */
export function createRestHandler(router: RestRouter): DualProtocolHandler {
  return (req, res) => {
    const url = new URL(req.url ?? "/", "http://rest.invalid");
    let match: RouteMatch;
    try {
      match = router.match(req.method ?? "GET", url.pathname);
    } catch (reason) {
      respondWithError(res, reason, req.method, url.pathname);
      return;
    }
    transcode(match, url, req, res).catch((reason: unknown) => respondWithError(res, reason, req.method, url.pathname));
  };
}

async function transcode(
  { route, variables }: RouteMatch,
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

  const abort = new AbortController();
  // Only a client that goes away early aborts the call (aborting creates a DOMException, not free).
  res.once("close", () => {
    if (!res.writableFinished) abort.abort();
  });
  const header = new Headers({ "content-type": "application/proto", "connect-protocol-version": "1" });
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined && !name.startsWith(":") && !transferHeaders.has(name)) {
      header.set(name, Array.isArray(value) ? value.join(", ") : value);
    }
  }
  const answer = await route.handler({
    httpVersion: "1.1",
    method: "POST",
    url: `http://rest.invalid${route.handler.requestPath}`,
    header,
    body: createAsyncIterable([toBinary(route.method.input, request.message)]),
    signal: abort.signal,
    contextValues: createContextValues().set(protocolKey, "rest"),
  });
  const bytes = answer.body === undefined ? new Uint8Array() : await readAllBytes(answer.body, maxBodyBytes * 16);
  answer.header?.forEach((value, name) => {
    if (!connectResponseHeaders.test(name)) res.setHeader(name, value);
  });
  if (answer.status === 200) {
    send(res, 200, writeMessage(fromBinary(route.method.output, bytes), route.method.output));
    return;
  }
  const error = errorFromJsonBytes(bytes, undefined, new ConnectError("upstream error", Code.Internal));
  const { status, body: errorBody } = toRestError(error);
  send(res, status, errorBody);
}

async function readBody(req: IncomingMessage | Http2ServerRequest): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBodyBytes) throw invalidRequest(`The request body is larger than ${maxBodyBytes} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString("utf8").trim();
  if (text === "") return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw invalidRequest("The request body is not valid JSON");
  }
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
