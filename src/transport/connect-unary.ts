import type { DescMethod } from "@bufbuild/protobuf";
import type { ConnectError, ConnectRouterOptions, ContextValues, MethodImplSpec } from "@connectrpc/connect";
import {
  compressionNegotiate,
  createMethodSerializationLookup,
  invokeUnaryImplementation,
  type MethodSerializationLookup,
  validateUniversalHandlerOptions,
} from "@connectrpc/connect/protocol";
import { documentedRefusal } from "./connect-refusals.js";
import { ApiError } from "../errors.js";
import { BodyTooLarge, copyHeaders, type DirectCall, directCall, type NodeRequest, readBody, RequestAborted } from "./direct-call.js";
import { documentedCodeOf, toConnectError, writeError, type NodeResponse } from "./errors.js";
import type { RequestRecord } from "./request-record.js";

/** The two unary content types, and whether each is binary. */
const unaryContentTypes = new Map([
  ["application/json", false],
  ["application/proto", true],
]);

/** IR_06 for a message over readMaxBytes, in the words Connect's refusal of it is answered with. */
class MessageTooLarge extends ApiError {
  constructor(maxBytes: number) {
    super("IR_06", `The request message is larger than ${maxBytes} bytes`);
  }
}

/** A Connect unary call the port has admitted, with the context values of its call. */
export interface ConnectUnaryCall {
  readonly method: DescMethod;
  readonly req: NodeRequest;
  readonly res: NodeResponse;
  readonly record: RequestRecord;
  readonly values: ContextValues;
}

/**
 * Answers the common Connect unary call — a POST of one JSON or binary message, uncompressed, with
 * no deadline — by invoking the implementation directly, through the same interceptors, with
 * connect's own codecs (the same strict JSON options) and connect's own answer: the message, or the
 * error's JSON with its HTTP status, each gzipped as connect would when the client accepts it. Any
 * other Connect call (a GET, a compressed body, `connect-timeout-ms`) goes to connect's handler,
 * whose conversion of the request into a fetch-like one and back costs more than a payment's own
 * work on the event loop (docs/performance.md, "Protocols").
 */
export class ConnectUnaryHandler {
  private readonly specs: Map<DescMethod, MethodImplSpec>;
  private readonly serializations = new Map<DescMethod, MethodSerializationLookup<never, never>>();
  private readonly options: ReturnType<typeof validateUniversalHandlerOptions>;

  constructor(specs: readonly MethodImplSpec[], options: ConnectRouterOptions) {
    this.specs = new Map(specs.filter((spec) => spec.kind === "unary").map((spec) => [spec.method, spec]));
    this.options = validateUniversalHandlerOptions(options);
  }

  /** Whether this handler answers `req`, a Connect call of `method`: decided from its headers alone. */
  accepts(req: NodeRequest, method: DescMethod): boolean {
    const { headers } = req;
    if (req.method !== "POST" || !this.specs.has(method)) return false;
    if (!unaryContentTypes.has(headers["content-type"] ?? "")) return false;
    const encoding = headers["content-encoding"];
    if (encoding !== undefined && encoding !== "identity") return false;
    return headers["connect-timeout-ms"] === undefined;
  }

  /** Answers a call `accepts` took: every failure in Connect's error shape, documented. */
  async serve({ method, req, res, record, values }: ConnectUnaryCall): Promise<void> {
    const spec = this.specs.get(method)!;
    const contentType = req.headers["content-type"]!;
    const binary = unaryContentTypes.get(contentType)!;
    const serialization = this.serializationOf(method);
    let call: DirectCall | undefined;
    let body: Uint8Array;
    try {
      const bytes = await readBody(req, this.options.readMaxBytes).catch((reason: unknown) => {
        // Connect's refusal of a message over readMaxBytes, as connect-refusals.ts words it.
        throw reason instanceof BodyTooLarge ? new MessageTooLarge(this.options.readMaxBytes) : reason;
      });
      let input: unknown;
      try {
        input = serialization.getI(binary).parse(bytes);
      } catch (reason) {
        // What connect would have answered, in our words (connect-refusals.ts).
        throw documentedRefusal(reason as ConnectError, "POST", method);
      }
      call = directCall(method, "connect", req, req.url ?? "", values);
      const output = await invokeUnaryImplementation(spec as never, call.context, input as never, this.options.interceptors);
      call.end();
      body = serialization.getO(binary).serialize(output as never);
    } catch (reason) {
      call?.end(reason);
      // Nobody is left to answer; the port logs the request as cut short.
      if (reason instanceof RequestAborted) return;
      if (call !== undefined) this.copyCallHeaders(call, res);
      const error = toConnectError(reason, record.id);
      record.answered(documentedCodeOf(error), error.cause ?? reason);
      // HTTP's own status for a body over the limit, as REST answers it; the Connect code stays invalid_argument.
      writeError(res, "connect", error, reason instanceof MessageTooLarge ? 413 : undefined);
      return;
    }
    this.copyCallHeaders(call, res);
    const compression = compressionNegotiate(
      this.options.acceptCompression,
      null,
      req.headers["accept-encoding"] ?? null,
      "accept-encoding",
    );
    if (compression.response !== null && body.byteLength >= this.options.compressMinBytes) {
      body = await compression.response.compress(body);
      res.setHeader("content-encoding", compression.response.name);
    }
    res.statusCode = 200;
    res.setHeader("content-type", contentType);
    res.setHeader("content-length", body.byteLength);
    res.end(body);
  }

  /** The call's response headers, and its trailers as Connect unary sends them: headers prefixed `trailer-`. */
  private copyCallHeaders(call: DirectCall, res: NodeResponse): void {
    copyHeaders(call.context.responseHeader, res);
    copyHeaders(call.context.responseTrailer, res, "trailer-");
  }

  private serializationOf(method: DescMethod): MethodSerializationLookup<never, never> {
    let serialization = this.serializations.get(method);
    if (serialization === undefined) {
      serialization = createMethodSerializationLookup(method as never, this.options.binaryOptions, this.options.jsonOptions, this.options);
      this.serializations.set(method, serialization);
    }
    return serialization;
  }
}
