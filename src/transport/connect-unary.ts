import type { DescMethod } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import { compressionNegotiate } from "@connectrpc/connect/protocol";
import { parseTimeout } from "@connectrpc/connect/protocol-connect";
import { documentedRefusal } from "./connect-refusals.js";
import {
  type AdmittedRpc,
  BodyTooLarge,
  copyHeaders,
  deadlineOf,
  type DirectMethods,
  MessageTooLarge,
  type NodeRequest,
  readBody,
  RequestAborted,
} from "./direct-call.js";
import { documentedCodeOf, toConnectError, writeError } from "./errors.js";

/** The two unary content types, and whether each is binary. */
const unaryContentTypes = new Map([
  ["application/json", false],
  ["application/proto", true],
]);

/**
 * Answers the common Connect unary call — a POST of one JSON or binary message, uncompressed, with or
 * without a deadline — by invoking the implementation directly, through the same interceptors, with
 * connect's own codecs (the same strict JSON options) and connect's own answer: the message, or the
 * error's JSON with its HTTP status, each gzipped as connect would when the client accepts it. Any
 * other Connect call (a GET, a compressed body, a `connect-timeout-ms` connect refuses) goes to
 * connect's handler, whose conversion of the request into a fetch-like one and back costs more than a
 * payment's own work on the event loop (docs/performance.md, "Protocols").
 */
export class ConnectUnaryHandler {
  constructor(private readonly methods: DirectMethods) {}

  /** Whether this handler answers `req`, a Connect call of `method`: decided from its headers alone. */
  accepts(req: NodeRequest, method: DescMethod): boolean {
    const { headers } = req;
    if (req.method !== "POST" || this.methods.spec(method) === undefined) return false;
    if (!unaryContentTypes.has(headers["content-type"] ?? "")) return false;
    const encoding = headers["content-encoding"];
    if (encoding !== undefined && encoding !== "identity") return false;
    return this.timeout(req).error === undefined;
  }

  /** The call's `connect-timeout-ms`, as connect reads it. */
  private timeout(req: NodeRequest): ReturnType<typeof parseTimeout> {
    const value = req.headers["connect-timeout-ms"];
    return parseTimeout(value === undefined ? null : String(value), this.methods.options.maxTimeoutMs);
  }

  /** Answers a call `accepts` took: every failure in Connect's error shape, documented. */
  async serve({ method, req, res, record, values }: AdmittedRpc): Promise<void> {
    const { options } = this.methods;
    // Counted from before the body is read, as connect counts it.
    const deadline = deadlineOf(this.timeout(req));
    const contentType = req.headers["content-type"]!;
    const binary = unaryContentTypes.get(contentType)!;
    let input: unknown;
    try {
      input = this.methods
        .serialization(method)
        .getI(binary)
        .parse(await readBody(req, options.readMaxBytes));
    } catch (reason) {
      // Nobody is left to answer; the port logs the request as cut short.
      if (reason instanceof RequestAborted) return;
      // What connect would have answered, in our words (connect-refusals.ts); over the limit, with
      // HTTP's own status for it, as REST answers it (the Connect code stays invalid_argument).
      const tooLarge = reason instanceof BodyTooLarge;
      const refusal = tooLarge ? new MessageTooLarge(options.readMaxBytes) : documentedRefusal(reason as ConnectError, "POST", method);
      const error = toConnectError(refusal, record.id);
      record.answered(documentedCodeOf(error));
      writeError(res, "connect", error, tooLarge ? 413 : undefined);
      return;
    }
    const outcome = await this.methods.invoke(method, "connect", req, values, record, input, binary, deadline);
    // Connect unary sends the call's trailers as headers prefixed `trailer-`.
    copyHeaders(outcome.call.context.responseHeader, res);
    copyHeaders(outcome.call.context.responseTrailer, res, "trailer-");
    if (outcome.error !== undefined) return writeError(res, "connect", outcome.error);
    let body = outcome.message;
    const compression = compressionNegotiate(options.acceptCompression, null, req.headers["accept-encoding"] ?? null, "accept-encoding");
    if (compression.response !== null && body.byteLength >= options.compressMinBytes) {
      body = await compression.response.compress(body);
      res.setHeader("content-encoding", compression.response.name);
    }
    res.statusCode = 200;
    res.setHeader("content-type", contentType);
    res.setHeader("content-length", body.byteLength);
    res.end(body);
  }
}
