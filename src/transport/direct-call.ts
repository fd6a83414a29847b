import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";
import type { DescMethod } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ConnectRouterOptions,
  type ContextValues,
  type HandlerContext,
  type MethodImplSpec,
} from "@connectrpc/connect";
import {
  createMethodSerializationLookup,
  invokeUnaryImplementation,
  type MethodSerializationLookup,
  validateUniversalHandlerOptions,
} from "@connectrpc/connect/protocol";
import { ApiError } from "../errors.js";
import { documentedCodeOf, type NodeResponse, toConnectError } from "./errors.js";
import type { RequestRecord } from "./request-record.js";

/*
 * What the port's direct calls share: REST calls, and the common Connect and gRPC unary calls, which
 * the port invokes on the implementation itself (invokeUnaryImplementation) rather than through
 * connect's universal handler, whose request and response adapters, linked signals and async iterables cost more than a
 * payment's own work on the event loop (docs/performance.md, "Protocols").
 */

/**
 * The unary methods the port may call directly, with connect's options (limits, compression, strict
 * JSON, interceptors) and connect's codecs for each, so a direct call reads and answers as connect's
 * handler would.
 */
export class DirectMethods {
  readonly options: ReturnType<typeof validateUniversalHandlerOptions>;
  private readonly specs: Map<DescMethod, MethodImplSpec>;
  private readonly serializations = new Map<DescMethod, MethodSerializationLookup<never, never>>();

  constructor(specs: readonly MethodImplSpec[], options: ConnectRouterOptions) {
    this.specs = new Map(specs.filter((spec) => spec.kind === "unary").map((spec) => [spec.method, spec]));
    this.options = validateUniversalHandlerOptions(options);
  }

  /** The implementation of `method` when it is unary. */
  spec(method: DescMethod): MethodImplSpec | undefined {
    return this.specs.get(method);
  }

  /**
   * Invokes `method` on `input` through the interceptors, as a call of `protocolName` over `req` due
   * by `deadline` if it has one: its answer serialized (binary or JSON), or its documented error,
   * recorded on `record`. The call's response headers and trailers are in `call.context` either way.
   */
  async invoke(
    method: DescMethod,
    protocolName: string,
    req: NodeRequest,
    values: ContextValues,
    record: RequestRecord,
    input: unknown,
    binary: boolean,
    deadline: number | undefined,
  ): Promise<DirectOutcome> {
    const call = directCall(method, protocolName, req, req.url ?? "", values, deadline);
    try {
      const output = await invokeUnaryImplementation(
        this.specs.get(method) as never,
        call.context,
        input as never,
        this.options.interceptors,
      );
      call.end();
      return {
        call,
        message: this.serialization(method)
          .getO(binary)
          .serialize(output as never),
      };
    } catch (reason) {
      call.end(reason);
      const error = toConnectError(reason, record.id);
      record.answered(documentedCodeOf(error), error.cause ?? reason);
      return { call, error };
    }
  }

  /** Connect's codecs of `method`'s messages, binary and JSON. */
  serialization(method: DescMethod): MethodSerializationLookup<never, never> {
    let serialization = this.serializations.get(method);
    if (serialization === undefined) {
      serialization = createMethodSerializationLookup(method as never, this.options.binaryOptions, this.options.jsonOptions, this.options);
      this.serializations.set(method, serialization);
    }
    return serialization;
  }
}

/** A request of either HTTP version. */
export type NodeRequest = IncomingMessage | Http2ServerRequest;

/** Request headers that describe the transfer itself and must not reach the RPC. */
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

/**
 * Why a call's context is aborted when it completes: given as the reason, it spares building a
 * DOMException for every request. (The context is built here rather than by connect's
 * createHandlerContext, whose linked deadline and request signals cost a few per cent of a
 * payment's CPU.)
 */
const callCompleted = new ConnectError("the call completed", Code.Canceled);

/** An RPC the port has routed and admitted, with the context values of its call. */
export interface AdmittedRpc {
  readonly method: DescMethod;
  readonly req: NodeRequest;
  readonly res: NodeResponse;
  readonly record: RequestRecord;
  readonly values: ContextValues;
}

/** What a direct call came to: its answer serialized, or its documented error. */
export type DirectOutcome =
  | { readonly call: DirectCall; readonly message: Uint8Array; readonly error?: undefined }
  | { readonly call: DirectCall; readonly message?: undefined; readonly error: ConnectError };

/** The context of a direct call, and how to end it. */
export interface DirectCall {
  readonly context: HandlerContext;
  /** Aborts the context's signal: with no reason once the call completed, else with why it failed. */
  end(reason?: unknown): void;
}

/**
 * The `Date.now()` by which a call must answer, from its timeout header parsed by connect's own
 * parser (`connect-timeout-ms`, `grpc-timeout`): undefined without one, or when the header is one
 * connect refuses, which connect's handler then answers.
 */
export function deadlineOf(parsed: { timeoutMs?: number; error?: ConnectError }): number | undefined {
  return parsed.timeoutMs === undefined || parsed.error !== undefined ? undefined : Date.now() + parsed.timeoutMs;
}

/**
 * The handler context of a call the port invokes directly. Its signal is aborted when the call ends,
 * as connect does, or at its `deadline` (a `Date.now()`) with connect's deadline_exceeded error, and
 * not when the client goes away: a call runs to completion, so an operation on money is never cut off
 * halfway (its outcome stays available to a retry with its idempotency key).
 */
export function directCall(
  method: DescMethod,
  protocolName: string,
  req: NodeRequest,
  url: string,
  values: ContextValues,
  deadline?: number,
): DirectCall {
  const ended = new AbortController();
  const passed = () => ended.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded));
  const remaining = deadline === undefined ? undefined : deadline - Date.now();
  // A deadline already passed aborts at once, as connect's does, so the call is refused before it runs.
  if (remaining !== undefined && remaining <= 0) passed();
  const timer = remaining !== undefined && remaining > 0 ? setTimeout(passed, remaining) : undefined;
  const context: HandlerContext = {
    service: method.parent,
    method,
    protocolName,
    requestMethod: req.method ?? "POST",
    url,
    signal: ended.signal,
    timeoutMs: deadline === undefined ? () => undefined : () => deadline - Date.now(),
    requestHeader: requestHeaders(req),
    responseHeader: new Headers(),
    responseTrailer: new Headers(),
    values,
  };
  return {
    context,
    end: (reason) => {
      clearTimeout(timer);
      ended.abort(reason ?? callCompleted);
    },
  };
}

/** The request's headers for the call, without those that describe the transfer itself. */
function requestHeaders(req: NodeRequest): Headers {
  const header: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined && !name.startsWith(":") && !transferHeaders.has(name)) {
      header[name] = Array.isArray(value) ? value.join(", ") : value;
    }
  }
  return new Headers(header);
}

/** Response headers an interceptor or implementation set (Idempotent-Replayed, …). */
export function copyHeaders(header: Headers, res: NodeResponse, prefix = ""): void {
  for (const [name, value] of header) res.setHeader(prefix + name, value);
}

/** IR_06 answered 413 Content Too Large: HTTP has a status for exactly this. */
export class BodyTooLarge extends ApiError {
  constructor(maxBytes: number) {
    super("IR_06", `The request body is larger than ${maxBytes} bytes`);
  }
}

/** IR_06 for a message over readMaxBytes: a direct call's refusal, and connect's in our words (connect-refusals.ts). */
export class MessageTooLarge extends ApiError {
  constructor(maxBytes: number) {
    super("IR_06", `The request message is larger than ${maxBytes} bytes`);
  }
}

/** The client went away while its body was being read. */
export class RequestAborted extends Error {}

/**
 * Reads a body of at most `maxBytes`. A larger one is refused as soon as it is known to be larger
 * — from its Content-Length before a byte is read, else when the limit is passed — and the rest of
 * it is never read: the port closes the request once the refusal is sent.
 */
export function readBody(req: NodeRequest, maxBytes: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"]);
  if (declared > maxBytes) return Promise.reject(new BodyTooLarge(maxBytes));
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
      if (size > maxBytes) refuse(new BodyTooLarge(maxBytes));
    };
    const onEnd = (): void => {
      stop();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    };
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
    // A stream closed before its end: the client went away without an error being raised.
    req.on("close", onError);
  });
}
