import { invokeUnaryImplementation } from "@connectrpc/connect/protocol";
import type { ContextValues, Interceptor } from "@connectrpc/connect";
import { invalidRequest } from "../../errors.js";
import { documentedCodeOf, toConnectError, writeError, type NodeResponse } from "../errors.js";
import { BodyTooLarge, copyHeaders, type DirectCall, directCall, type NodeRequest, readBody, RequestAborted } from "../direct-call.js";
import type { RequestRecord } from "../request-record.js";
import type { RequestTarget } from "../request-target.js";
import { readMessage, writeMessage } from "../../rest-json/codec.js";
import { applyPathVariables, applyQuery } from "./params.js";
import { asksFor, type Renderings } from "./renderings.js";
import type { RouteMatch } from "./router.js";

/** Largest REST body accepted; payment requests are a few kilobytes. */
const maxBodyBytes = 1024 * 1024;

/** A REST request the port has routed and admitted, with the context values of its call. */
export interface RestCall {
  readonly match: RouteMatch;
  readonly target: RequestTarget;
  readonly req: NodeRequest;
  readonly res: NodeResponse;
  readonly record: RequestRecord;
  readonly values: ContextValues;
}

/**
 * Serves the documented JSON REST paths by transcoding each request into a call of the very
 * implementation that serves Connect and gRPC, through the same interceptors, so limits,
 * idempotency, validation and errors behave identically whatever the protocol. The answer is JSON,
 * or the route's rendering when the request's Accept header asks for it. Every failure is answered
 * here, in the documented REST shape.
 */
export function createRestHandler(interceptors: Interceptor[], renderings: Renderings): (call: RestCall) => Promise<void> {
  return async ({ match: { route, variables }, target, req, res, record, values }) => {
    let call: DirectCall | undefined;
    try {
      const body = parseJson(await readBody(req, maxBodyBytes));
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
      call = directCall(route.method, "rest", req, req.url ?? target.path, values);
      const output = await invokeUnaryImplementation(route.spec, call.context, request.message, interceptors);
      call.end();
      copyHeaders(call.context.responseHeader, res);
      const rendering = renderings.get(route.method.output.typeName);
      if (rendering !== undefined && asksFor(req.headers.accept, rendering.mediaType)) {
        send(res, rendering.mediaType, rendering.render(output));
      } else {
        send(res, "application/json", JSON.stringify(writeMessage(output, route.method.output)));
      }
    } catch (reason) {
      call?.end(reason);
      // Nobody is left to answer; the port logs the request as cut short.
      if (reason instanceof RequestAborted) return;
      if (call !== undefined) copyHeaders(call.context.responseHeader, res);
      const error = toConnectError(reason, record.id);
      record.answered(documentedCodeOf(error), error.cause ?? reason);
      writeError(res, "rest", error, reason instanceof BodyTooLarge ? 413 : undefined);
    }
  };
}

function send(res: NodeResponse, mediaType: string, payload: string): void {
  res.statusCode = 200;
  res.setHeader("content-type", mediaType);
  res.setHeader("content-length", Buffer.byteLength(payload));
  res.end(payload);
}

/** Decodes UTF-8 strictly: a body that is not UTF-8 is refused rather than read with replacement characters. */
const utf8 = new TextDecoder("utf-8", { fatal: true });

/** A REST body as JSON; undefined for an empty one. */
function parseJson(body: Buffer): unknown {
  let text: string;
  try {
    text = utf8.decode(body).trim();
  } catch {
    throw invalidRequest("The request body is not valid UTF-8");
  }
  if (text === "") return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw invalidRequest("The request body is not valid JSON");
  }
}
