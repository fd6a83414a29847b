import { gunzipSync } from "node:zlib";
import { ScalarType, type DescField, type DescMessage, type DescMethod } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import {
  compressedFlag,
  createAsyncIterable,
  encodeEnvelope,
  readAllBytes,
  type UniversalServerResponse,
} from "@connectrpc/connect/protocol";
import { codeToHttpStatus, errorFromJsonBytes, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import {
  findTrailerError,
  headerGrpcMessage,
  headerGrpcStatus,
  headerStatusDetailsBin,
  setTrailerStatus,
} from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import { invalidRequest, type ApiError } from "../errors.js";
import { illFormedText } from "../validation/text.js";
import { MessageTooLarge } from "./direct-call.js";
import { documentedCodeOf, toConnectError } from "./errors.js";
import type { RpcProtocol } from "./protocol.js";
import type { RequestRecord } from "./request-record.js";

/*
 * Connect reads a request (frames, decompresses, decodes) before any interceptor runs, and answers
 * what it cannot read in its own terms: a protobuf body that does not parse as `internal` (HTTP 500,
 * gRPC 13), other mistakes without the documented ErrorDetail. Everything our interceptors throw
 * carries an ErrorDetail, so an error without one on an RPC answer was raised by connect while
 * reading the request: the caller's mistake, answered here as IR_06 `invalid_argument` (HTTP 400,
 * gRPC 3) naming what was wrong, in each protocol's own place for errors.
 */

/** The proto JSON a field takes, for a message that says what was expected rather than quote what was sent. */
function expectation(field: DescField): string {
  const kind = field.fieldKind === "list" ? "an array" : field.fieldKind === "map" ? "an object" : undefined;
  if (kind !== undefined) return `expected ${kind}`;
  if (field.fieldKind === "enum") {
    return `expected one of ${field.enum.values.flatMap((v) => (v.number === 0 ? [] : [v.name])).join(", ")}`;
  }
  if (field.fieldKind === "message") {
    return field.message.typeName === "google.protobuf.Timestamp"
      ? "expected an RFC 3339 timestamp such as 2026-01-31T12:00:00Z"
      : "expected an object";
  }
  switch (field.scalar) {
    case ScalarType.STRING:
      return "expected a string";
    case ScalarType.BOOL:
      return "expected true or false";
    case ScalarType.BYTES:
      return "expected base64 text";
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return "expected a number";
    default:
      return "expected an integer (64-bit ones as a string of digits or a number)";
  }
}

/** Every field under `root`, with its path in request terms (`address.city`); recursive types are followed once. */
function fieldsUnder(root: DescMessage, path = "", seen = new Set<DescMessage>()): [string, DescField][] {
  if (seen.has(root)) return [];
  seen.add(root);
  return root.fields.flatMap((field): [string, DescField][] => {
    const fieldPath = path === "" ? field.name : `${path}.${field.name}`;
    const nested = field.message === undefined || field.fieldKind === "map" ? [] : fieldsUnder(field.message, fieldPath, seen);
    return [[fieldPath, field], ...nested];
  });
}

/** The path of the first field under `root` that `matches`, to name it in an error. */
function pathTo(root: DescMessage, matches: (field: DescField) => boolean): [string, DescField] | undefined {
  return fieldsUnder(root).find(([, field]) => matches(field));
}

/** The path of a message type under `root` ("" for root itself), to name where an unknown key was. */
function messagePath(root: DescMessage, typeName: string): string | undefined {
  if (root.typeName === typeName) return "";
  return pathTo(root, (field) => field.message?.typeName === typeName)?.[0];
}

/** Connect's words for a body or message over readMaxBytes, refused before it is read whole. */
const sizeLimitRefusal = /larger than configured readMaxBytes (\d+)/;

/** What connect's refusal messages (and protobuf-es's, which connect passes on) say, in our words. */
const readings: readonly [RegExp, (match: RegExpExecArray, input: DescMessage) => ApiError | string][] = [
  [
    /^cannot decode field (\S+)\.(\w+) from JSON: (?:list item #\d+: |map entry .*: |invalid map key: )?(?:expected string: )?invalid UTF8$/s,
    (m, input) => illFormedText(pathTo(input, (field) => field.parent.typeName === m[1] && field.name === m[2])?.[0] ?? m[2]!),
  ],
  [
    /^cannot decode message (\S+) from JSON: key "(.*)" is unknown$/s,
    (m, input) => {
      const at = messagePath(input, m[1]!);
      return `Unknown field: ${at === undefined || at === "" ? m[2] : `${at}.${m[2]}`}`;
    },
  ],
  [
    /^cannot decode field (\S+)\.(\w+) from JSON/,
    (m, input) => {
      const found = pathTo(input, (field) => field.parent.typeName === m[1] && field.name === m[2]);
      return found === undefined ? `Invalid value for field ${m[2]}` : `Invalid value for field ${found[0]}: ${expectation(found[1])}`;
    },
  ],
  [
    /^cannot decode enum (\S+) from JSON/,
    (m, input) => {
      const found = pathTo(input, (field) => field.enum?.typeName === m[1]);
      return found === undefined ? `Invalid value of enum ${m[1]}` : `Invalid value for field ${found[0]}: ${expectation(found[1])}`;
    },
  ],
  [/^Invalid value for field (.+): text must not contain NUL/s, (m) => illFormedText(m[1]!)],
  [/^The encoded data was not valid for encoding utf-8/, () => "The request body is not valid UTF-8"],
  [/from (?:JSON|binary): maximum recursion depth/, () => "The request nests messages too deeply"],
  // JSON.parse's own words, which quote the start of the body.
  [
    /^cannot decode message \S+ from JSON: (?:Unexpected|Expected|Bad|Unterminated|.* is not valid JSON$)/s,
    () => "The request body is not valid JSON",
  ],
  [/^cannot decode message (\S+) from JSON/, (m) => `The request is not a valid JSON form of ${m[1]}`],
  [/^parse binary: (.*)$/s, (m) => `The request body is not a valid protobuf message: ${m[1]}`],
  [
    /^protocol error: incomplete envelope/,
    () => "The request ends inside a message frame: its length prefix promises more bytes than were sent",
  ],
  [/^protocol error: missing input message/, () => "The request carries no message; a unary call takes exactly one"],
  [
    /^protocol error: received extra input message/,
    () => "The request carries more than one message, or bytes after its message; a unary call takes exactly one",
  ],
  [sizeLimitRefusal, (m) => new MessageTooLarge(Number(m[1]))],
  [/^unknown compression "(.*)": supported encodings are (.*)$/s, (m) => `Unsupported compression "${m[1]}"; supported: ${m[2]}`],
  [
    /compressed envelope, but do not know how to decompress|already compressed/,
    () => "A message is flagged compressed but the request names no compression (grpc-encoding)",
  ],
  [/^decompression failed/, () => "The request body could not be decompressed"],
  [
    /^protocol error: invalid (grpc|connect) timeout value/,
    (m) => `Invalid ${m[1] === "grpc" ? "grpc-timeout" : "connect-timeout-ms"} header`,
  ],
  [/^timeout (\d+)ms must be <= (\d+)/, (m) => `The deadline may be at most ${m[2]} ms away`],
  [/JSON/, () => "The request body is not valid JSON"],
];

/**
 * The documented refusal of a request for `method` connect could not read. Connect's own words may
 * quote the offending value (a card number, say), so they are never passed on: only what a reading
 * above extracts, with the field named by its path in the request. A Connect GET whose `message`
 * parameter does not decode reaches here as a bare "internal error".
 */
export function documentedRefusal(error: ConnectError, httpMethod: string | undefined, method: DescMethod): ApiError {
  for (const [pattern, say] of readings) {
    const match = pattern.exec(error.rawMessage);
    if (match === null) continue;
    const said = say(match, method.input);
    return typeof said === "string" ? invalidRequest(said) : said;
  }
  if (httpMethod === "GET") {
    return invalidRequest(
      "The message query parameter could not be decoded (base64url when base64=1, else as the encoding parameter says)",
    );
  }
  return invalidRequest("The request could not be read");
}

/**
 * Gives the documented shape to refusals connect answered itself, where each protocol carries its
 * errors: the JSON body of a Connect answer, the trailers of a gRPC one, the trailer frame at the
 * end of a gRPC-Web body. Errors that already carry an ErrorDetail pass untouched.
 */
export async function withDocumentedRefusals(
  answer: UniversalServerResponse,
  protocol: RpcProtocol,
  request: { readonly httpMethod: string | undefined; readonly method: DescMethod },
  record: RequestRecord,
): Promise<UniversalServerResponse> {
  const refused = (error: ConnectError): ConnectError | undefined => {
    if (documentedCodeOf(error) !== undefined) return undefined;
    const documented = toConnectError(documentedRefusal(error, request.httpMethod, request.method), record.id);
    record.answered("IR_06");
    return documented;
  };
  switch (protocol) {
    case "connect":
      return connectAnswer(answer, refused);
    case "grpc":
      return answer.body === undefined || answer.trailer === undefined
        ? answer
        : { ...answer, body: afterBody(answer.body, () => rewriteStatus(answer.trailer!, refused)) };
    case "grpc-web":
      return answer.body === undefined ? answer : { ...answer, body: withGrpcWebTrailer(answer.body, refused) };
  }
}

/**
 * Largest Connect error body read back. Ours are short (ApiError caps messages), but connect's own
 * may quote a whole request body (up to the 1 MiB limit, escaped as JSON).
 */
const maxErrorBytes = 8 * 1024 * 1024;

/**
 * A unary Connect error is the whole JSON body of a non-200 answer, gzipped when the client accepts
 * gzip and the body is over a kilobyte (connect's own may be, quoting a long value). A rewritten
 * one is sent uncompressed: it is short.
 */
async function connectAnswer(
  answer: UniversalServerResponse,
  refused: (error: ConnectError) => ConnectError | undefined,
): Promise<UniversalServerResponse> {
  const header = answer.header;
  if (answer.status === 200 || answer.body === undefined || header === undefined) return answer;
  if (header.get("content-type") !== "application/json") return answer;
  const bytes = await readAllBytes(answer.body, maxErrorBytes);
  const gzipped = header.get("content-encoding") === "gzip";
  const json = gzipped ? gunzipSync(bytes, { maxOutputLength: maxErrorBytes }) : bytes;
  const raised = errorFromJsonBytes(json, undefined, new ConnectError("The request could not be read"));
  const error = refused(raised);
  if (error === undefined) return { ...answer, body: createAsyncIterable([bytes]) };
  const body = errorToJsonBytes(error, {});
  header.delete("content-encoding");
  header.set("content-length", String(body.byteLength));
  // HTTP's own status for a body over the limit, as REST answers it; the Connect code stays invalid_argument.
  const status = sizeLimitRefusal.test(raised.rawMessage) ? 413 : codeToHttpStatus(error.code);
  return { ...answer, status, body: createAsyncIterable([body]) };
}

/** The body, then `after()` once it has been read to its end: connect sets gRPC trailers while the body is read. */
async function* afterBody(body: AsyncIterable<Uint8Array>, after: () => void): AsyncIterable<Uint8Array> {
  yield* body;
  after();
}

/** Replaces a gRPC status without ErrorDetail in `trailer` by the documented one; whether it did. */
function rewriteStatus(trailer: Headers, refused: (error: ConnectError) => ConnectError | undefined): boolean {
  const found = findTrailerError(trailer);
  const error = found === undefined ? undefined : refused(found);
  if (error === undefined) return false;
  for (const name of [headerGrpcStatus, headerGrpcMessage, headerStatusDetailsBin]) trailer.delete(name);
  setTrailerStatus(trailer, error);
  return true;
}

/**
 * gRPC-Web carries its trailers as the body's last frame (flag 0x80), gzipped (flag 0x01 too) when
 * the client accepts gzip and the frame is over a kilobyte; connect yields one frame per chunk. A
 * rewritten trailer is sent uncompressed: it is short.
 */
async function* withGrpcWebTrailer(
  body: AsyncIterable<Uint8Array>,
  refused: (error: ConnectError) => ConnectError | undefined,
): AsyncIterable<Uint8Array> {
  for await (const chunk of body) {
    if (chunk.byteLength < 5 || (chunk[0]! & trailerFlag) !== trailerFlag) {
      yield chunk;
      continue;
    }
    const data = chunk.subarray(5);
    const trailer = trailerParse(
      (chunk[0]! & compressedFlag) === compressedFlag ? gunzipSync(data, { maxOutputLength: maxErrorBytes }) : data,
    );
    yield rewriteStatus(trailer, refused) ? encodeEnvelope(trailerFlag, trailerSerialize(trailer)) : chunk;
  }
}
