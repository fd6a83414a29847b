import type { ServerResponse } from "node:http";
import { constants as http2Constants, type Http2ServerResponse } from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import {
  codeToHttpStatus,
  contentTypeStreamProto,
  contentTypeStreamRegExp,
  endStreamFlag,
  endStreamToJson,
  errorToJsonBytes,
} from "@connectrpc/connect/protocol-connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { create, type DescFile } from "@bufbuild/protobuf";
import { file_google_rpc_status } from "../../gen/google/rpc/status_pb.js";
import { ErrorDetailSchema, file_paymentservice_v1_error } from "../../gen/paymentservice/v1/error_pb.js";
import { isDatabaseUnavailable } from "../db/errors.js";
import { ApiError, errorCatalogue, internalError, notImplemented, serviceUnavailable, unrecognizedUrl, type ErrorCode } from "../errors.js";
import { respecGrpcMessage } from "./grpc-message.js";
import type { WireProtocol } from "./protocol.js";

/*
 * One conversion of errors to the wire, as vanguard-go's errors.go: whatever went wrong becomes a
 * ConnectError carrying the documented ErrorDetail (decisions §5), and that ConnectError is written
 * in the shape of the request's protocol: the REST error object, Connect's error JSON, or gRPC and
 * gRPC-Web status headers.
 */

/** The documented error body as REST clients receive it. */
export interface RestErrorBody {
  error: { type: string; code: string; message: string; request_id?: string };
}

/**
 * The files of the types errors carry: a gRPC client receives a google.rpc.Status holding our
 * ErrorDetail in `grpc-status-details-bin`. No method names either, so reflection is handed them
 * to let clients decode what they receive.
 */
export const errorTypeFiles: readonly DescFile[] = [file_google_rpc_status, file_paymentservice_v1_error];

/** A Node response of either HTTP version. */
export type NodeResponse = ServerResponse | Http2ServerResponse;

/** The ConnectError of a documented error: its code's Connect code (unless `code` says otherwise), with the ErrorDetail. */
export function documentedError(error: ApiError, code: Code = errorCatalogue[error.code].connectCode): ConnectError {
  const row = errorCatalogue[error.code];
  return new ConnectError(error.message, code, undefined, [
    { desc: ErrorDetailSchema, value: create(ErrorDetailSchema, { type: row.type, code: error.code, message: error.message }) },
  ]);
}

/**
 * The answer to an RPC path no method is served at. Its ErrorDetail is IR_02, an unknown path, as
 * REST says of one; its code is `unimplemented`, which gRPC and Connect give an unknown method and
 * their clients act on (a gRPC health client, for one, stops retrying on it).
 */
export function unknownMethodError(httpMethod: string, path: string): ConnectError {
  return documentedError(unrecognizedUrl(httpMethod, path), Code.Unimplemented);
}

/**
 * HE_00 for a failure of ours. Its message carries the request id, which the log line holding the
 * cause carries too, so a report from a client leads to the cause; the cause itself is never sent.
 */
function internalFailure(requestId: string | undefined, cause: unknown): ConnectError {
  const error = documentedError(internalError(requestId));
  error.cause = cause;
  return error;
}

/** How soon a call refused for an unavailable database is worth retrying (Retry-After, seconds). */
const unavailableRetryAfterSeconds = 1;

/**
 * SU_01 for a database that cannot serve the call now, with Retry-After; the driver's words stay in
 * the log, as the cause.
 */
function unavailable(cause: unknown): ConnectError {
  const error = documentedError(serviceUnavailable());
  error.metadata.set("retry-after", String(unavailableRetryAfterSeconds));
  error.cause = cause;
  return error;
}

/**
 * Turns anything a handler threw into the ConnectError clients receive, its ErrorDetail carrying
 * the request's id. Our ApiErrors keep their code as an ErrorDetail, and connect's `unimplemented`
 * (a method not built yet) becomes IR_00; a database that is down, restarting or not answering in
 * time is SU_01; anything else is an internal failure whose details stay in the log.
 */
export function toConnectError(reason: unknown, requestId?: string): ConnectError {
  const error = documentedShape(reason, requestId);
  return requestId === undefined ? error : withRequestId(error, requestId);
}

function documentedShape(reason: unknown, requestId: string | undefined): ConnectError {
  if (reason instanceof ApiError) return reason.code === "SU_01" ? unavailable(reason) : documentedError(reason);
  if (isDatabaseUnavailable(reason)) return unavailable(reason);
  if (reason instanceof ConnectError && documentedCodeOf(reason) !== undefined) return reason;
  if (reason instanceof ConnectError && reason.code === Code.Unimplemented) {
    return documentedError(notImplemented(reason.rawMessage));
  }
  return internalFailure(requestId, reason);
}

/**
 * A copy of a documented error whose ErrorDetail names the request, so that every error body a
 * client receives can be quoted and found in the log. A copy, not a change: an error may be thrown
 * to more than one call.
 */
function withRequestId(error: ConnectError, requestId: string): ConnectError {
  const details = error.details.map((detail) =>
    "desc" in detail && detail.desc === ErrorDetailSchema ? { desc: ErrorDetailSchema, value: { ...detail.value, requestId } } : detail,
  );
  const stamped = new ConnectError(error.rawMessage, error.code, error.metadata, undefined, error.cause);
  stamped.details = details;
  return stamped;
}

/** The documented code an error carries as its ErrorDetail, if it carries one. */
export function documentedCodeOf(error: ConnectError): ErrorCode | undefined {
  const code = error.findDetails(ErrorDetailSchema)[0]?.code;
  return code !== undefined && code in errorCatalogue ? (code as ErrorCode) : undefined;
}

/** The REST status and body of a documented error. */
export function toRestError(error: ConnectError): { status: number; body: RestErrorBody } {
  const detail = error.findDetails(ErrorDetailSchema)[0];
  const code = documentedCodeOf(error) ?? "HE_00";
  const row = errorCatalogue[code];
  return {
    status: row.httpStatus,
    body: {
      error: {
        type: row.type,
        code,
        message: detail?.message ?? error.rawMessage,
        ...(detail?.requestId ? { request_id: detail.requestId } : {}),
      },
    },
  };
}

/**
 * Answers a request with `error` in the shape its protocol defines, with the error's metadata as
 * headers. `status` overrides the HTTP status where HTTP has a more precise one than the code's
 * (415 for a content type no protocol uses); gRPC answers are HTTP 200 whatever the error, with the
 * status in the headers (a trailers-only answer, as gRPC and gRPC-Web allow).
 */
export function writeError(res: NodeResponse, protocol: WireProtocol, error: ConnectError, status?: number): void {
  if (res.headersSent) {
    // Too late to answer: the client learns of the failure from the cut stream.
    destroyResponse(res);
    return;
  }
  for (const [name, value] of error.metadata) res.setHeader(name, value);
  closeIfBodyUnread(res);
  switch (protocol) {
    case "rest": {
      const rest = toRestError(error);
      send(res, status ?? rest.status, "application/json", JSON.stringify(rest.body));
      return;
    }
    case "connect": {
      // A Connect streaming client reads errors from the stream's end message only: an HTTP status tells it nothing.
      const contentType = String(res.req.headers["content-type"] ?? "");
      if (contentTypeStreamRegExp.test(contentType)) {
        const end = new TextEncoder().encode(JSON.stringify(endStreamToJson(new Headers(), error, {})));
        const streamType = contentType.startsWith(contentTypeStreamProto) ? contentTypeStreamProto : "application/connect+json";
        send(res, 200, streamType, encodeEnvelope(endStreamFlag, end));
        return;
      }
      send(res, status ?? codeToHttpStatus(error.code), "application/json", errorToJsonBytes(error, {}));
      return;
    }
    case "grpc":
    case "grpc-web": {
      const header = setTrailerStatus(new Headers(), error);
      if (protocol === "grpc") respecGrpcMessage(header);
      for (const [name, value] of header) res.setHeader(name, value);
      send(res, 200, protocol === "grpc" ? "application/grpc+proto" : "application/grpc-web+proto", "");
      return;
    }
  }
}

function send(res: NodeResponse, status: number, contentType: string, body: string | Uint8Array): void {
  res.statusCode = status;
  res.setHeader("content-type", contentType);
  res.setHeader("content-length", typeof body === "string" ? Buffer.byteLength(body) : body.byteLength);
  // Writing even an empty chunk sends HTTP/2 headers without END_STREAM. A gRPC trailers-only answer
  // must end the stream in its one HEADERS frame: @grpc/grpc-js reads the status from headers only
  // then, and otherwise reports "Call ended without gRPC status".
  if (body.length === 0) res.end();
  else res.end(body);
}

/**
 * Largest unread request body drained after an answer rather than cut off by closing the
 * connection: what the service would have read anyway (the REST and RPC body limit). A refusal
 * (401, 429, …) of an ordinary request keeps its connection; a 100 MB upload does not.
 */
const drainableBytes = 1024 * 1024;

/**
 * An answer given before its request's body was read to its end (a refusal) ends an HTTP/1.1
 * connection when the rest of the body is large or of unknown length, and says so with
 * `connection: close`: Node then closes it after the answer instead of reading the rest (a 100 MB
 * upload) to discard it, and the client does not reuse a connection whose request it has not
 * finished sending. A smaller body is read and dropped, and the connection kept, unless its reader
 * gave up on it. (HTTP/2 resets the stream instead; see the node handler.)
 */
export function closeIfBodyUnread(res: NodeResponse): void {
  if ("stream" in res || res.req.complete || res.headersSent) return;
  const declared = Number(res.req.headers["content-length"] ?? Number.NaN);
  // A request a reader gave up on (connect stops reading a body it cannot parse) is destroyed, and
  // Node cannot read the rest of it to reach the next request on the connection.
  if (res.req.destroyed || !(declared <= drainableBytes)) res.setHeader("connection", "close");
}

/** Ends a response that can no longer carry an error: the connection (HTTP/1.1) or the stream (HTTP/2) is cut. */
export function destroyResponse(res: NodeResponse): void {
  if ("stream" in res) res.stream.close(http2Constants.NGHTTP2_INTERNAL_ERROR);
  else res.destroy();
}
