import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";
import { Code, ConnectError, type ContextValues, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { invokeUnaryImplementation } from "@connectrpc/connect/protocol";
import { ApiError, invalidRequest } from "../../errors.js";
import { documentedCodeOf, toConnectError, writeError, type NodeResponse } from "../errors.js";
import type { RequestRecord } from "../request-record.js";
import type { RequestTarget } from "../request-target.js";
import { readMessage, writeMessage } from "../../rest-json/codec.js";
import { applyPathVariables, applyQuery } from "./params.js";
import type { RouteMatch } from "./router.js";

/** Largest REST body accepted; payment requests are a few kilobytes. */
const maxBodyBytes = 1024 * 1024;

/** Request headers that describe the REST transfer itself and must not reach the RPC. */
const transferHeaders = new Set([
  "content-type",
  "content-length",
  "content-encoding",
  "accept-encoding",
  "transfer-encoding",
  "connection",
  "host",
  "keep-alive",
  "te",
  "upgrade",
]);

/** A REST request the port has routed and admitted, with the context values of its call. */
export interface RestCall {
  readonly match: RouteMatch;
  readonly target: RequestTarget;
  readonly req: IncomingMessage | Http2ServerRequest;
  readonly res: NodeResponse;
  readonly record: RequestRecord;
  readonly values: ContextValues;
}

/**
 * Serves the documented JSON REST paths by transcoding each request into a call of the very
 * implementation that serves Connect and gRPC, through the same interceptors, so limits,
 * idempotency, validation and errors behave identically whatever the protocol. Every failure is
 * answered here, in the documented REST shape.
 */
export function createRestHandler(interceptors: Interceptor[]): (call: RestCall) => Promise<void> {
  return async ({ match: { route, variables }, target, req, res, record, values }) => {
    const ended = new AbortController();
    let context: HandlerContext | undefined;
    try {
      const body = await readBody(req);
      const request = readMessage(route.method.input, route.body === "*" ? (body ?? {}) : {});
      if (route.body === "" && body !== undefined && (typeof body !== "object" || body === null || Object.keys(body).length > 0)) {
        throw invalidRequest(`${route.httpMethod} ${route.template} takes no request body`);
      }
      if (route.body === "") {
        applyQuery(request, target.query);
      } else if (target.query.size > 0) {
        throw invalidRequest(`${route.httpMethod} ${route.template} takes its parameters in the JSON body, not the query string`);
      }
      applyPathVariables(request, route.variables, variables);
      context = {
        service: route.method.parent,
        method: route.method,
        protocolName: "rest",
        requestMethod: route.httpMethod,
        url: req.url ?? target.path,
        // Aborted when the call ends, as connect does; not when the client goes away: a call runs to
        // completion, so an operation on money is never cut off halfway (its outcome stays available
        // to a retry with its idempotency key). No deadline: REST has no timeout header.
        signal: ended.signal,
        timeoutMs: () => undefined,
        requestHeader: requestHeaders(req),
        responseHeader: new Headers(),
        responseTrailer: new Headers(),
        values,
      };
      const output = await invokeUnaryImplementation(route.spec, context, request.message, interceptors);
      ended.abort(callCompleted);
      copyHeaders(context.responseHeader, res);
      sendJson(res, writeMessage(output, route.method.output));
    } catch (reason) {
      ended.abort(reason);
      // Nobody is left to answer; the port logs the request as cut short.
      if (reason instanceof RequestAborted) return;
      if (context !== undefined) copyHeaders(context.responseHeader, res);
      const error = toConnectError(reason, record.id);
      record.answered(documentedCodeOf(error), error.cause ?? reason);
      writeError(res, "rest", error, reason instanceof BodyTooLarge ? 413 : undefined);
    }
  };
}

/**
 * Why a call's context is aborted when it completes: given as the reason, it spares building a
 * DOMException for every request. (The context is built here rather than by connect's
 * createHandlerContext, whose linked deadline and request signals cost a few per cent of a
 * payment's CPU and mean nothing for REST.)
 */
const callCompleted = new ConnectError("the call completed", Code.Canceled);

/** The request's headers for the call, without those that describe the REST transfer itself. */
function requestHeaders(req: IncomingMessage | Http2ServerRequest): Headers {
  const header: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined && !name.startsWith(":") && !transferHeaders.has(name)) {
      header[name] = Array.isArray(value) ? value.join(", ") : value;
    }
  }
  return new Headers(header);
}

/** Response headers an interceptor or implementation set (Idempotent-Replayed, …). */
function copyHeaders(header: Headers, res: NodeResponse): void {
  for (const [name, value] of header) res.setHeader(name, value);
}

function sendJson(res: NodeResponse, body: unknown): void {
  const payload = JSON.stringify(body);
  res.statusCode = 200;
  res.setHeader("content-type", "application/json");
  res.setHeader("content-length", Buffer.byteLength(payload));
  res.end(payload);
}

/** IR_06 answered 413 Content Too Large: HTTP has a status for exactly this. */
class BodyTooLarge extends ApiError {
  constructor() {
    super("IR_06", `The request body is larger than ${maxBodyBytes} bytes`);
  }
}

/** The client went away while its body was being read. */
class RequestAborted extends Error {}

/** Decodes UTF-8 strictly: a body that is not UTF-8 is refused rather than read with replacement characters. */
const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Reads a JSON body of at most maxBodyBytes. A larger one is refused as soon as it is known to be
 * larger — from its Content-Length before a byte is read, else when the limit is passed — and the
 * rest of it is never read: the port closes the request once the refusal is sent.
 */
function readBody(req: IncomingMessage | Http2ServerRequest): Promise<unknown> {
  const declared = Number(req.headers["content-length"]);
  if (declared > maxBodyBytes) return Promise.reject(new BodyTooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = (): void => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      req.off("close", onError);
    };
    const refuse = (error: Error): void => {
      stop();
      req.pause();
      reject(error);
    };
    const onError = (): void => refuse(new RequestAborted("the client went away while sending its request"));
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      chunks.push(chunk);
      if (size > maxBodyBytes) refuse(new BodyTooLarge());
    };
    const onEnd = (): void => {
      stop();
      let text: string;
      try {
        text = utf8.decode(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).trim();
      } catch {
        reject(invalidRequest("The request body is not valid UTF-8"));
        return;
      }
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
    // A stream closed before its end: the client went away without an error being raised.
    req.on("close", onError);
  });
}
