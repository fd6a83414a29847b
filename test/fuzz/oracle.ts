import { gunzipSync } from "node:zlib";
import { Code, ConnectError } from "@connectrpc/connect";
import { errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { trailerParse } from "@connectrpc/connect/protocol-grpc-web";
import { ErrorDetailSchema } from "../../gen/paymentservice/v1/error_pb.js";
import { readEnvelopes } from "../support/wire.js";
import type { FuzzRequest } from "./fuzz-request.js";
import type { ApiSchema } from "./schema.js";
import type { Answer } from "./senders.js";

/*
 * What every answer must satisfy, whatever was sent: no server error, the documented error shape
 * with a documented code on every protocol, a message that names the field it is about, and never
 * a card number sent in a card_number field.
 */

/**
 * The documented errors (docs/api-conventions.md), written out here rather than taken from src/ so
 * that a wrong catalogue entry fails the suite.
 */
const documentedErrors: Record<string, { readonly type: string; readonly status: number }> = {
  IR_00: { type: "invalid_request", status: 501 },
  IR_01: { type: "authentication_error", status: 401 },
  IR_02: { type: "invalid_request", status: 404 },
  IR_03: { type: "invalid_request", status: 405 },
  IR_04: { type: "invalid_request", status: 400 },
  IR_05: { type: "invalid_request", status: 400 },
  IR_06: { type: "invalid_request", status: 400 },
  IR_13: { type: "invalid_request", status: 400 },
  IR_14: { type: "invalid_request", status: 400 },
  IR_16: { type: "invalid_request", status: 400 },
  IR_22: { type: "authentication_error", status: 403 },
  HE_00: { type: "api_error", status: 500 },
  HE_01: { type: "invalid_request", status: 409 },
  HE_02: { type: "invalid_request", status: 404 },
  IK_01: { type: "idempotency_error", status: 409 },
  IK_02: { type: "idempotency_error", status: 422 },
  RL_01: { type: "rate_limit_error", status: 429 },
  TO_01: { type: "timeout_error", status: 504 },
};

/** Headers that set a Connect or gRPC deadline: only a request carrying one may be answered TO_01. */
const deadlineHeaders = new Set(["connect-timeout-ms", "grpc-timeout"]);

/** Whether the request set a deadline of its own, the one excuse for a TO_01 (HTTP 504 over Connect). */
function setsDeadline(request: FuzzRequest): boolean {
  return request.wire.kind !== "socket" && request.wire.headers.some(([name]) => deadlineHeaders.has(name.toLowerCase()));
}

/** Statuses Node's HTTP parser answers a malformed request with; the body must still be IR_06. */
const parserStatuses = new Set([400, 408, 413, 414, 431]);

/** gRPC statuses that mean the server failed: UNKNOWN, INTERNAL, UNAVAILABLE, DATA_LOSS. */
const serverFailureGrpcStatuses = new Set([Code.Unknown, Code.Internal, Code.Unavailable, Code.DataLoss]);

/** Header names and metadata key paths an IR_04/IR_05 message may name instead of a field. */
const nonFieldSubjects = /x-idempotency-key|idempotency-key|admin-api-key|api-key|metadata\.\S/i;

/** One broken promise of the contract. */
export interface Violation {
  /** Groups violations of one cause: the protocol, the rule and the answer, without the request's details. */
  readonly kind: string;
  readonly detail: string;
}

/** What an answer told about its outcome, for the run's statistics. */
export interface Outcome {
  /** `HTTP 404` or `grpc-status 5`, or `no answer`. */
  readonly status: string;
  /** The documented error code, when the answer carried one. */
  readonly code: string | undefined;
}

/** The verdict on one answer. */
export interface Judgement {
  readonly outcome: Outcome;
  readonly violations: Violation[];
}

/** The documented error of an answer, whichever way its protocol carries it. */
interface ErrorDetailFound {
  readonly type: string;
  readonly code: string;
  readonly message: string;
  readonly requestId: string;
}

/** Judges answers against the contract, knowing the API's field names. */
export class Oracle {
  private readonly fieldPatterns = new Map<ReadonlySet<string>, RegExp>();

  constructor(private readonly schema: ApiSchema) {}

  /** Every violation in one answer. */
  judge(request: FuzzRequest, answer: Answer): Judgement {
    const violations: Violation[] = [];
    const violate = (rule: string, detail: string): void => {
      violations.push({ kind: `${request.protocol}: ${rule}`, detail });
    };
    if (answer.failure !== undefined) {
      violate(`${answerFailureKind(answer.failure)} (${request.label})`, answer.failure);
      if (answer.status === 0) return { outcome: { status: "no answer", code: undefined }, violations };
    }

    let outcome: Outcome;
    if (isParserAnswer(request, answer)) {
      outcome = this.judgeRest(request, answer, violate);
    } else if (request.answeredAs === "grpc") {
      outcome = this.judgeGrpc(request, answer, violate);
    } else if (request.answeredAs === "connect") {
      outcome = this.judgeConnect(request, answer, violate);
    } else {
      outcome = this.judgeRest(request, answer, violate);
    }
    this.checkCardNumbers(request, answer, violate);
    return { outcome, violations };
  }

  private judgeRest(request: FuzzRequest, answer: Answer, violate: (rule: string, detail: string) => void): Outcome {
    const outcome: Outcome = { status: `HTTP ${answer.status}`, code: undefined };
    const isHead = request.wire.kind === "http1" && request.wire.method === "HEAD";
    if (answer.status === 200) return outcome;
    if (isHead) {
      if (answer.status >= 500 && answer.status !== 501) violate(`HTTP ${answer.status} to HEAD`, describeAnswer(answer));
      return outcome;
    }
    let body: unknown;
    try {
      body = JSON.parse(answer.body.toString("utf8"));
    } catch {
      violate(`HTTP ${answer.status} without a JSON error body`, describeAnswer(answer));
      return outcome;
    }
    const error = restError(body);
    if (error === undefined) {
      violate(`HTTP ${answer.status} with a body that is not exactly {"error":{"type","code","message"}}`, describeAnswer(answer));
      return outcome;
    }
    const judged = { ...outcome, code: error.code };
    this.checkDetail(request, error, answer.status, "HTTP", violate, answer);
    return judged;
  }

  private judgeConnect(request: FuzzRequest, answer: Answer, violate: (rule: string, detail: string) => void): Outcome {
    const outcome: Outcome = { status: `HTTP ${answer.status}`, code: undefined };
    if (answer.status === 200) return outcome;
    if (!(answer.headers.get("content-type") ?? "").startsWith("application/json")) {
      violate(`HTTP ${answer.status} error without content-type application/json`, describeAnswer(answer));
      return outcome;
    }
    let error: ConnectError;
    try {
      // Connect gzips an error over a kilobyte when the client accepts gzip.
      const body = answer.headers.get("content-encoding") === "gzip" ? gunzipSync(answer.body) : answer.body;
      error = errorFromJsonBytes(body, undefined, new ConnectError("not a Connect error body", Code.Unknown));
    } catch {
      violate(`HTTP ${answer.status} with a body that is not a Connect error {code, message, details}`, describeAnswer(answer));
      return outcome;
    }
    const detail = error.findDetails(ErrorDetailSchema)[0];
    if (detail === undefined) {
      // A server failure is the worse of the two faults; its missing detail is reported with it.
      const rule =
        answer.status >= 500
          ? `HTTP ${answer.status} ${Code[error.code]}`
          : `HTTP ${answer.status} ${Code[error.code]} without an ErrorDetail`;
      violate(`${rule}: ${messageShape(error.rawMessage)}`, describeAnswer(answer));
      return outcome;
    }
    this.checkDetail(request, detail, answer.status, "HTTP", violate, answer);
    return { ...outcome, code: detail.code };
  }

  private judgeGrpc(request: FuzzRequest, answer: Answer, violate: (rule: string, detail: string) => void): Outcome {
    if (answer.status >= 500) violate(`HTTP ${answer.status}`, describeAnswer(answer));
    const trailer = grpcTrailer(request, answer);
    const status = trailer?.get("grpc-status");
    if (trailer === undefined || status === null || status === undefined) {
      violate(`HTTP ${answer.status} without grpc-status`, describeAnswer(answer));
      return { status: `HTTP ${answer.status}, no grpc-status`, code: undefined };
    }
    const outcome: Outcome = { status: `grpc-status ${status}`, code: undefined };
    const code = Number(status);
    if (code === 0) return outcome;
    const message = decodeGrpcMessage(trailer.get("grpc-message"));
    if (serverFailureGrpcStatuses.has(code)) {
      violate(`grpc-status ${status} (${Code[code]}): ${cause(message, request)}`, describeAnswer(answer, trailer));
      return outcome;
    }
    if (!trailer.has("grpc-status-details-bin")) {
      violate(
        `grpc-status ${status} (${Code[code]}) without grpc-status-details-bin: ${messageShape(message)}`,
        describeAnswer(answer, trailer),
      );
      return outcome;
    }
    let detail: ErrorDetailFound | undefined;
    try {
      detail = findTrailerError(trailer)?.findDetails(ErrorDetailSchema)[0];
    } catch (error) {
      violate(`grpc-status ${status} with undecodable grpc-status-details-bin`, `${String(error)}; ${describeAnswer(answer, trailer)}`);
      return outcome;
    }
    if (detail === undefined) {
      violate(`grpc-status ${status} without an ErrorDetail`, describeAnswer(answer, trailer));
      return outcome;
    }
    this.checkDetail(request, detail, code, "grpc-status", violate, answer);
    return { ...outcome, code: detail.code };
  }

  /**
   * Checks a documented error: a known code, its type, the request id of the answer, the HTTP status
   * it maps to (REST only, where the status is the contract), no server failure, and a field named in
   * IR_04/IR_05 messages.
   */
  private checkDetail(
    request: FuzzRequest,
    detail: ErrorDetailFound,
    status: number,
    statusKind: "HTTP" | "grpc-status",
    violate: (rule: string, detail: string) => void,
    answer: Answer,
  ): void {
    const documented = documentedErrors[detail.code];
    const shown = () => `${detail.code} ${JSON.stringify(detail.message)}; ${describeAnswer(answer)}`;
    if (documented === undefined) {
      violate(`undocumented error code ${detail.code}`, shown());
      return;
    }
    if (documented.type !== detail.type) violate(`${detail.code} with type ${detail.type}, documented ${documented.type}`, shown());
    const requestId = answer.headers.get("x-request-id");
    if (detail.requestId === "" || detail.requestId !== requestId) {
      violate(`${detail.code} naming request ${JSON.stringify(detail.requestId)} in an answer with X-Request-Id ${requestId}`, shown());
    }
    if (detail.code === "TO_01" && !setsDeadline(request)) violate("TO_01 to a request that set no deadline", shown());
    if (statusKind === "HTTP") {
      const documentedServerStatus = (status === 501 && detail.code === "IR_00") || (status === 504 && detail.code === "TO_01");
      if (status >= 500 && !documentedServerStatus) violate(`HTTP ${status} ${detail.code}: ${cause(detail.message, request)}`, shown());
      const parserAnswer = detail.code === "IR_06" && parserStatuses.has(status);
      if (request.answeredAs === "rest" && status !== documented.status && !parserAnswer) {
        violate(`${detail.code} with HTTP ${status}, documented ${documented.status}`, shown());
      }
    }
    if ((detail.code === "IR_04" || detail.code === "IR_05") && !this.namesField(request, detail.message)) {
      violate(`${detail.code} message names no field: ${messageShape(detail.message)}`, shown());
    }
  }

  /** Whether a message names a field of the method's input tree (any method's, when the URL was mangled). */
  private namesField(request: FuzzRequest, message: string): boolean {
    if (nonFieldSubjects.test(message)) return true;
    const names = request.method === undefined || request.pathMangled ? this.schema.allFieldNames : request.method.fieldNames;
    let pattern = this.fieldPatterns.get(names);
    if (pattern === undefined) {
      pattern = new RegExp(`\\b(${[...names].join("|")})\\b`);
      this.fieldPatterns.set(names, pattern);
    }
    return pattern.test(message);
  }

  /** No card number of a card_number field may come back, in the body, the headers or the trailers. */
  private checkCardNumbers(request: FuzzRequest, answer: Answer, violate: (rule: string, detail: string) => void): void {
    if (request.cardNumbers.length === 0) return;
    const text = [answer.body.toString("latin1"), ...headerValues(answer.headers), ...headerValues(answer.trailers)].join("\n");
    for (const number of request.cardNumbers) {
      if (text.includes(number))
        violate("card number of a card_number field echoed in the answer", `${number} in ${describeAnswer(answer)}`);
    }
  }
}

/** Card numbers of card_number fields that appear in log lines: digit runs checked against the set sent. */
export function cardNumbersInLog(lines: readonly string[], sent: ReadonlySet<string>): { number: string; line: string }[] {
  const found: { number: string; line: string }[] = [];
  for (const line of lines) {
    for (const run of line.match(/\d{12,}/g) ?? []) {
      for (let length = 12; length <= 19; length++) {
        for (let start = 0; start + length <= run.length; start++) {
          const candidate = run.slice(start, start + length);
          if (sent.has(candidate)) found.push({ number: candidate, line });
        }
      }
    }
  }
  return found;
}

function restError(body: unknown): ErrorDetailFound | undefined {
  if (!isPlainObject(body) || Object.keys(body).join() !== "error") return undefined;
  const error = body.error;
  if (!isPlainObject(error) || Object.keys(error).sort().join() !== "code,message,request_id,type") return undefined;
  const { type, code, message, request_id } = error;
  return typeof type === "string" && typeof code === "string" && typeof message === "string" && typeof request_id === "string"
    ? { type, code, message, requestId: request_id }
    : undefined;
}

/**
 * An answer from Node's HTTP/1.1 parser rather than from Connect: a parser status with no Connect
 * or gRPC answer in it. The parser cannot know which protocol a request meant, so such an answer is
 * held to the REST shape (IR_06) whatever was sent.
 */
function isParserAnswer(request: FuzzRequest, answer: Answer): boolean {
  if (request.wire.kind === "http2" || !parserStatuses.has(answer.status) || answer.headers.has("grpc-status")) return false;
  const contentType = answer.headers.get("content-type") ?? "";
  return !contentType.startsWith("application/json") || isRestErrorBody(answer.body);
}

function isRestErrorBody(body: Buffer): boolean {
  try {
    return restError(JSON.parse(body.toString("utf8"))) !== undefined;
  } catch {
    return false;
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The trailers of a gRPC or gRPC-Web answer: HTTP/2 trailers, the gRPC-Web trailer frame (gzipped
 * when its compressed flag is set, as connect does for a gzip call), or the headers of a
 * trailers-only answer. A trailer frame that cannot be read counts as no trailers.
 */
function grpcTrailer(request: FuzzRequest, answer: Answer): Headers | undefined {
  if (answer.trailers?.has("grpc-status") === true) return answer.trailers;
  if (request.protocol === "grpc-web") {
    const frame = readEnvelopes(answer.body).find((e) => (e.flags & 0x80) === 0x80);
    if (frame !== undefined) {
      try {
        return trailerParse((frame.flags & 0x01) === 0x01 ? gunzipSync(frame.data) : frame.data);
      } catch {
        return undefined;
      }
    }
  }
  return answer.headers.has("grpc-status") ? answer.headers : undefined;
}

function decodeGrpcMessage(value: string | null): string {
  if (value === null) return "";
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/**
 * A message with its variable parts blanked (message types, the JSON parser's description of the
 * offending value, quoted values, ids, numbers), so one cause is one violation kind.
 */
function messageShape(message: string): string {
  return message
    .replace(/paymentservice\.v\d+\.[\w.]+/g, "<type>")
    .replace(/ from JSON[\s\S]*$/, " from JSON")
    .replace(/\b(value|values): [\s\S]*$/, "$1: …")
    .replace(/"[^"]*"/g, '"…"')
    .replace(/\b[a-z]{2,4}_[A-Za-z0-9]{6,}\b/g, "<id>")
    .replace(/\d+/g, "N")
    .slice(0, 120);
}

/**
 * The cause part of a violation kind: the message's shape, and for the generic HE_00 message, which
 * says nothing about the cause, the request's label instead.
 */
function cause(message: string, request: FuzzRequest): string {
  return message.startsWith("Something went wrong on our side") ? `generic HE_00 message (${request.label})` : messageShape(message);
}

function answerFailureKind(failure: string): string {
  return failure
    .replace(/\d+/g, "N")
    .replace(/\(code N\)/, "")
    .slice(0, 100);
}

function headerValues(headers: Headers | undefined): string[] {
  if (headers === undefined) return [];
  return [...headers].map(([name, value]) => `${name}: ${value}`);
}

/** The answer in a few lines for a violation report. */
function describeAnswer(answer: Answer, trailer?: Headers): string {
  const body = answer.body.toString("utf8");
  const shownBody = body.length > 500 ? `${body.slice(0, 500)}… (${answer.body.length} bytes)` : body;
  const trailers = trailer ?? answer.trailers;
  return `answered HTTP ${answer.status} ${headerValues(answer.headers).join("; ")}${trailers === undefined ? "" : ` | trailers ${headerValues(trailers).join("; ")}`} | body ${JSON.stringify(shownBody)}`;
}
