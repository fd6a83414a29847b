import * as fc from "fast-check";
import { gzipBody, jsonTextMutation, protobufMutation } from "./byte-mutations.js";
import { printable, type FuzzRequest } from "./fuzz-request.js";
import { framings, grpcTimeout } from "./grpc-framing.js";
import type { Header, HeaderArbitraries } from "./header-arbitraries.js";
import { nonObjectJson, type JsonBodies } from "./json-body-arbitraries.js";
import { cardNumbersIn } from "./card-numbers.js";
import { jsonText } from "./json-text.js";
import { percentEncode } from "./percent-encoding.js";
import { encodeMessage, type ProtoMessages } from "./proto-message-arbitraries.js";
import type { ApiMethod, ApiSchema } from "./schema.js";
import { deeplyNested } from "./value-arbitraries.js";

/** A serialised request message and the card numbers it carries in card_number fields. */
interface Payload {
  readonly bytes: Uint8Array;
  readonly cardNumbers: readonly string[];
}

/** The two codecs every RPC protocol offers. */
type Codec = "proto" | "json";

/** `undefined` most of the time, the value now and then. */
function rarely<T>(arbitrary: fc.Arbitrary<T>, oneIn: number): fc.Arbitrary<T | undefined> {
  return fc.oneof({ weight: oneIn - 1, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary });
}

/** Whether the server answers the method with a stream, which ends only when the client or its deadline ends it. */
function streams(method: ApiMethod): boolean {
  return method.desc.methodKind === "server_streaming";
}

/**
 * Connect, gRPC and gRPC-Web requests for every method: messages in both codecs, whole or damaged,
 * in correct and broken envelopes, with the protocol's own headers right and wrong.
 */
export class RpcArbitraries {
  constructor(
    private readonly schema: ApiSchema,
    private readonly bodies: JsonBodies,
    private readonly messages: ProtoMessages,
    private readonly headers: HeaderArbitraries,
  ) {}

  /** Connect unary calls: POST with JSON or binary bodies, and GET for side-effect-free methods. */
  connect(): fc.Arbitrary<FuzzRequest> {
    return fc.oneof(
      ...this.schema.methods.flatMap((method) => [
        this.connectPost(method, "json"),
        this.connectPost(method, "proto"),
        ...(method.sideEffectFree ? [this.connectGet(method)] : []),
      ]),
    );
  }

  /** gRPC over HTTP/2 prior knowledge. */
  grpc(): fc.Arbitrary<FuzzRequest> {
    return fc.oneof(
      ...this.schema.methods.flatMap((method) => [this.enveloped(method, "proto", "grpc"), this.enveloped(method, "json", "grpc")]),
    );
  }

  /** gRPC-Web over HTTP/1.1. */
  grpcWeb(): fc.Arbitrary<FuzzRequest> {
    return fc.oneof(
      ...this.schema.methods.flatMap((method) => [this.enveloped(method, "proto", "grpc-web"), this.enveloped(method, "json", "grpc-web")]),
    );
  }

  /** A request message: mostly well-formed, sometimes damaged after serialisation. */
  private payload(method: ApiMethod, codec: Codec): fc.Arbitrary<Payload> {
    if (codec === "proto") {
      return fc.tuple(this.messages.init(method.input), rarely(protobufMutation, 5)).map(([init, mutation]) => {
        const bytes = encodeMessage(method.input, init);
        return { bytes: mutation === undefined ? bytes : mutation.apply(bytes), cardNumbers: cardNumbersIn(init) };
      });
    }
    const tree = fc.oneof(
      { weight: 20, arbitrary: this.bodies.message(method.input, "proto-json") },
      { weight: 1, arbitrary: nonObjectJson },
      { weight: 1, arbitrary: deeplyNested },
    );
    return fc.tuple(tree, rarely(jsonTextMutation, 6)).map(([json, mutation]) => {
      const bytes = Buffer.from(jsonText(json), "utf8");
      return { bytes: mutation === undefined ? bytes : mutation.apply(bytes), cardNumbers: cardNumbersIn(json) };
    });
  }

  private connectPost(method: ApiMethod, codec: Codec): fc.Arbitrary<FuzzRequest> {
    return fc
      .record({
        payload: this.payload(method, codec),
        contentType:
          codec === "json"
            ? fc.constantFrom("application/json", "application/json", "application/json; charset=utf-8")
            : fc.constant("application/proto"),
        protocolVersion: fc.oneof(
          { weight: 10, arbitrary: fc.constant<Header[]>([["connect-protocol-version", "1"]]) },
          { weight: 1, arbitrary: fc.constantFrom<Header[]>([], [["connect-protocol-version", "2"]]) },
        ),
        // A stream that was read well runs until its deadline: one is always set, or it would never answer.
        timeout: streams(method) ? fc.constant("300") : rarely(fc.constantFrom("1500", "0", "abc", "-1", "10000000000", "1.5", ""), 10),
        compression: rarely(gzipBody, 12),
        credentials: this.headers.credentials(method),
        idempotency: this.headers.idempotency,
      })
      .map(({ payload, contentType, protocolVersion, timeout, compression, credentials, idempotency }) => {
        const headers: Header[] = [["content-type", contentType], ...protocolVersion, ...credentials, ...idempotency];
        if (timeout !== undefined) headers.push(["connect-timeout-ms", timeout]);
        if (compression !== undefined) headers.push(["content-encoding", "gzip"]);
        return printable({
          protocol: "connect",
          label: `connect ${codec} ${method.rpcPath}${compression === undefined ? "" : ` (${compression.name})`}`,
          variant: undefined,
          method,
          pathMangled: false,
          cardNumbers: payload.cardNumbers,
          answeredAs: "connect",
          wire: {
            kind: "http1",
            method: "POST",
            target: method.rpcPath,
            headers,
            body: compression === undefined ? payload.bytes : compression.apply(payload.bytes),
          },
        });
      });
  }

  /** Connect's GET form, `?connect=v1&encoding=…&message=…`, right and wrong. */
  private connectGet(method: ApiMethod): fc.Arbitrary<FuzzRequest> {
    const query = fc.oneof(
      {
        weight: 4,
        arbitrary: this.payload(method, "json").map(
          (p) => `connect=v1&encoding=json&message=${percentEncode(Buffer.from(p.bytes).toString("utf8"))}`,
        ),
      },
      {
        weight: 4,
        arbitrary: this.payload(method, "proto").map(
          (p) => `connect=v1&encoding=proto&base64=1&message=${Buffer.from(p.bytes).toString("base64url")}`,
        ),
      },
      {
        weight: 2,
        arbitrary: fc.constantFrom(
          "connect=v1&encoding=proto&base64=1&message=!!!!",
          "connect=v1&encoding=json&base64=1&message=!!!!",
          "connect=v1&encoding=json&message=!!!!",
          "connect=v1&encoding=json",
          "connect=v1&encoding=xml&message=%7B%7D",
          "connect=v2&encoding=json&message=%7B%7D",
          "encoding=json&message=%7B%7D",
          "connect=v1&encoding=json&compression=gzip&message=%7B%7D",
          "connect=v1&encoding=json&compression=br&message=%7B%7D",
          "connect=v1&encoding=proto&message=%FF%FF",
          "connect=v1&encoding=json&message=%7B%7D&message=%7B%7D",
        ),
      },
    );
    // A GET message is meant to be small: past Node's 16 KB limit for the request head every
    // long one would only test the parser's 431 again. A cut may split a %XX escape, which is a
    // case of its own.
    const short = query.map((search) => search.slice(0, 6_000));
    return fc.tuple(short, this.headers.credentials(method)).map(([search, credentials]) =>
      printable({
        protocol: "connect",
        label: `connect GET ${method.rpcPath}`,
        variant: undefined,
        method,
        pathMangled: false,
        cardNumbers: [],
        answeredAs: "connect",
        wire: { kind: "http1", method: "GET", target: `${method.rpcPath}?${search}`, headers: credentials, body: undefined },
      }),
    );
  }

  /** A gRPC or gRPC-Web call: a message in envelopes, correct or not. */
  private enveloped(method: ApiMethod, codec: Codec, protocol: "grpc" | "grpc-web"): fc.Arbitrary<FuzzRequest> {
    const contentTypes =
      protocol === "grpc"
        ? codec === "proto"
          ? ["application/grpc", "application/grpc+proto"]
          : ["application/grpc+json"]
        : codec === "proto"
          ? ["application/grpc-web", "application/grpc-web+proto"]
          : ["application/grpc-web+json"];
    return fc
      .record({
        payload: this.payload(method, codec),
        framing: framings,
        contentType: fc.constantFrom(...contentTypes),
        timeout: streams(method) ? fc.constant("300m") : rarely(grpcTimeout, 10),
        credentials: this.headers.credentials(method),
        idempotency: this.headers.idempotency,
      })
      .map(({ payload, framing, contentType, timeout, credentials, idempotency }) => {
        const framed = framing.frame(payload.bytes);
        const headers: Header[] = [["content-type", contentType], ...framed.headers, ...credentials, ...idempotency];
        headers.push(protocol === "grpc" ? ["te", "trailers"] : ["x-grpc-web", "1"]);
        if (timeout !== undefined) headers.push(["grpc-timeout", timeout]);
        return printable({
          protocol,
          label: `${protocol} ${codec} ${method.rpcPath} (${framing.name})`,
          variant: undefined,
          method,
          pathMangled: false,
          cardNumbers: payload.cardNumbers,
          answeredAs: "grpc",
          wire:
            protocol === "grpc"
              ? { kind: "http2", path: method.rpcPath, headers, body: framed.body }
              : { kind: "http1", method: "POST", target: method.rpcPath, headers, body: framed.body },
        });
      });
  }
}
