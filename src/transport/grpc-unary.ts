import type { DescMethod } from "@bufbuild/protobuf";
import { compressionNegotiate, encodeEnvelope } from "@connectrpc/connect/protocol";
import { parseTimeout } from "@connectrpc/connect/protocol-grpc";
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
import { writeError } from "./errors.js";

/** The content types of a gRPC call of protobuf messages. */
const protoContentTypes = new Set(["application/grpc", "application/grpc+proto"]);
/** A gRPC message's frame: a flags byte, then the message's length in four bytes. */
const frameHeaderBytes = 5;

/** A gRPC unary call the port has admitted, and the way to connect's handler for it. */
export interface GrpcUnaryCall extends AdmittedRpc {
  /** Answers the call through connect's handler, its body being `body`, already read. */
  readonly viaConnect: (body: Uint8Array) => Promise<void>;
}

/**
 * Answers the common gRPC unary call — HTTP/2, one uncompressed protobuf message in one frame, with
 * or without a deadline — by invoking the implementation directly, through the same interceptors,
 * with connect's own codec, and answering as connect does: the message in one frame (gzipped when the
 * client accepts gzip and it is over a kilobyte) and `grpc-status: 0` in the trailers, or a
 * documented error (trailers-only). A body it cannot read as exactly that (a frame cut short or
 * flagged compressed, two messages, bytes protobuf refuses) goes, as read, to connect's handler, so
 * that every refusal is connect's own, documented by connect-refusals.ts. Any other gRPC call goes
 * there from the start. Connect runs a unary gRPC call through its streaming pipeline of async
 * iterables, which costs more than a payment's own work on the event loop (docs/performance.md,
 * "Protocols"). A `grpc-timeout` connect refuses goes to connect's handler too, which answers it.
 */
export class GrpcUnaryHandler {
  constructor(private readonly methods: DirectMethods) {}

  /** Whether this handler answers `req`, a gRPC call of `method`: decided from its headers alone. */
  accepts(req: NodeRequest, method: DescMethod): boolean {
    const { headers } = req;
    if (req.httpVersionMajor !== 2 || req.method !== "POST" || this.methods.spec(method) === undefined) return false;
    if (!protoContentTypes.has(headers["content-type"] ?? "")) return false;
    const encoding = headers["grpc-encoding"];
    if (encoding !== undefined && encoding !== "identity") return false;
    return this.timeout(req).error === undefined;
  }

  /** The call's `grpc-timeout`, as connect reads it. */
  private timeout(req: NodeRequest): ReturnType<typeof parseTimeout> {
    const value = req.headers["grpc-timeout"];
    return parseTimeout(value === undefined ? null : String(value), this.methods.options.maxTimeoutMs);
  }

  /** Answers a call `accepts` took. */
  async serve({ method, req, res, record, values, viaConnect }: GrpcUnaryCall): Promise<void> {
    const { options } = this.methods;
    // Counted from before the body is read, as connect counts it.
    const deadline = deadlineOf(this.timeout(req));
    let bytes: Buffer;
    try {
      bytes = await readBody(req, options.readMaxBytes + frameHeaderBytes);
    } catch (reason) {
      // Nobody is left to answer; the port logs the request as cut short.
      if (reason instanceof RequestAborted) return;
      // Connect's refusal of a message over readMaxBytes, as connect-refusals.ts words it.
      throw reason instanceof BodyTooLarge ? new MessageTooLarge(options.readMaxBytes) : reason;
    }
    const input = this.messageOf(method, bytes);
    if (input === undefined) return viaConnect(bytes);
    const outcome = await this.methods.invoke(method, "grpc", req, values, record, input, true, deadline);
    copyHeaders(outcome.call.context.responseHeader, res);
    if (outcome.error !== undefined) return writeError(res, "grpc", outcome.error);
    let message = outcome.message;
    let flags = 0;
    const accepted = req.headers["grpc-accept-encoding"];
    const compression = compressionNegotiate(
      options.acceptCompression,
      null,
      accepted === undefined ? null : String(accepted),
      "grpc-accept-encoding",
    );
    if (compression.response !== null) {
      res.setHeader("grpc-encoding", compression.response.name);
      if (message.byteLength >= options.compressMinBytes) {
        message = await compression.response.compress(message);
        flags = 1;
      }
    }
    res.statusCode = 200;
    res.setHeader("content-type", "application/grpc+proto");
    res.addTrailers({ ...Object.fromEntries(outcome.call.context.responseTrailer), "grpc-status": "0" });
    res.end(encodeEnvelope(flags, message));
  }

  /** The request's one message, when the body is exactly one uncompressed frame holding a message protobuf reads. */
  private messageOf(method: DescMethod, bytes: Buffer): unknown {
    if (bytes.length < frameHeaderBytes || bytes[0] !== 0 || bytes.readUInt32BE(1) !== bytes.length - frameHeaderBytes) return undefined;
    try {
      return this.methods.serialization(method).getI(true).parse(bytes.subarray(frameHeaderBytes));
    } catch {
      return undefined;
    }
  }
}
