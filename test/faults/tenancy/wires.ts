import type { DescService, JsonObject, Message } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../../../gen/paymentservice/v1/error_pb.js";
import { readMessage, writeMessage } from "../../../src/rest-json/codec.js";
import type { ApiMethod, RestRoute } from "../../fuzz/schema.js";
import { rest, rpcClient, type RestResponse } from "../../support/clients.js";
import { type DocumentedCode, documentedErrors, expectExactRestError, expectRpcError } from "../../support/errors.js";
import { query } from "../../support/resource-api.js";

/*
 * One RPC called over one way in: a REST binding of its google.api.http rule, Connect with JSON or
 * binary protobuf, gRPC or gRPC-Web. Requests are written once, as REST JSON, and the RPC protocols
 * send the same message; answers come back as REST JSON whatever the way in, so the matrix judges
 * them all alike.
 */

/** The RPC protocols, beside the REST bindings of each method; Connect GET only for side-effect-free methods. */
const rpcWires = ["connect-json", "connect-binary", "connect-get", "grpc", "grpc-web"] as const;

/** An RPC protocol. */
type RpcWire = (typeof rpcWires)[number];

/** A way into the service: an RPC protocol, or one REST binding. */
export type Wire = RpcWire | RestRoute;

/** Every way into `method`: each of its REST bindings, then every RPC protocol it answers. */
export function wiresOf(method: ApiMethod): Wire[] {
  return [...method.routes, ...rpcWires.filter((wire) => wire !== "connect-get" || method.sideEffectFree)];
}

/** A wire as a failure message names it. */
export function wireName(wire: Wire): string {
  return typeof wire === "string" ? wire : `REST ${wire.httpMethod} ${wire.template}`;
}

/** Who calls: a merchant key, or the operator. */
export interface Credentials {
  readonly apiKey?: string;
  readonly admin?: boolean;
}

/** What a call answered: the objects (one, or a stream's), or a failure judged against a documented code. */
export type Answer =
  | { readonly ok: true; readonly objects: JsonObject[]; readonly text: string }
  | {
      readonly ok: false;
      /** The documented error code the answer carries, if it carries one. */
      readonly code: string | undefined;
      /** Why the failure is not `code` (the documented HTTP status, Connect code and ErrorDetail), or undefined when it is. */
      readonly differsFrom: (code: DocumentedCode) => string | undefined;
      readonly summary: string;
    };

/** How long a stream that did not fail at once is read before the call counts as answered. */
const streamReadMs = 3_000;

type DynamicClient = Record<string, (request: Message, options?: { timeoutMs?: number; headers?: Record<string, string> }) => unknown>;

const clients = new Map<string, DynamicClient>();

function clientFor(service: DescService, url: string, wire: RpcWire, who: Credentials): DynamicClient {
  const id = `${url} ${service.typeName} ${wire} ${who.apiKey ?? ""} ${who.admin === true}`;
  let client = clients.get(id);
  if (client === undefined) {
    const protocol = wire === "grpc" || wire === "grpc-web" ? wire : "connect";
    const connect = { useBinaryFormat: wire !== "connect-json", useHttpGet: wire === "connect-get" };
    client = rpcClient(service, url, protocol, who, connect) as unknown as DynamicClient;
    clients.set(id, client);
  }
  return client;
}

function assertionText(check: () => unknown): string | undefined {
  try {
    check();
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message.split("\n")[0] : String(error);
  }
}

function restAnswer(res: RestResponse): Answer {
  if (res.status === 200) return { ok: true, objects: [res.body], text: res.text };
  return {
    ok: false,
    code: res.body?.error?.code,
    differsFrom: (code) => assertionText(() => expectExactRestError(res, documentedErrors[code].http, code)),
    summary: `HTTP ${res.status} ${res.text.slice(0, 200)}`,
  };
}

async function rpcFailure(error: unknown): Promise<Answer> {
  const summary = error instanceof ConnectError ? `${Code[error.code]}: ${error.rawMessage}` : String(error);
  const judge = async (code: DocumentedCode) => {
    try {
      await expectRpcError(Promise.reject(error), documentedErrors[code].rpc, code);
      return undefined;
    } catch (failure) {
      return failure instanceof Error ? failure.message.split("\n")[0] : String(failure);
    }
  };
  // expectRpcError is asynchronous; the codes are few, so every one is judged up front.
  const verdicts = new Map(
    await Promise.all((Object.keys(documentedErrors) as DocumentedCode[]).map(async (c) => [c, await judge(c)] as const)),
  );
  const code = error instanceof ConnectError ? error.findDetails(ErrorDetailSchema)[0]?.code : undefined;
  return { ok: false, code, differsFrom: (c) => verdicts.get(c), summary };
}

/** The REST path and body of `request` on `route`: path variables go in the path, the rest in the body or the query. */
function restRequest(route: RestRoute, request: JsonObject): { path: string; body: JsonObject | undefined } {
  const rest: JsonObject = { ...request };
  const path = route.segments
    .map((segment) => {
      if ("literal" in segment) return segment.literal;
      const value = rest[segment.variable.name];
      delete rest[segment.variable.name];
      if (typeof value !== "string") throw new Error(`${route.template}: no ${segment.variable.name} to put in the path`);
      return encodeURIComponent(value);
    })
    .join("/");
  if (route.takesBody) return { path: `/${path}`, body: rest };
  for (const [name, value] of Object.entries(rest)) {
    if (typeof value === "object" && value !== null) throw new Error(`${route.template} takes no body: ${name} cannot go in the query`);
  }
  return { path: `/${path}${query(rest)}`, body: undefined };
}

/** Headers beside the credentials, and how long a stream is read: until an object `until` accepts (included), else for `readMs`. */
export interface CallOptions {
  readonly headers?: Record<string, string>;
  readonly until?: (object: JsonObject) => boolean;
  readonly readMs?: number;
}

/** Calls `method` with `request` (REST JSON) over `wire` on the service at `url`. */
export async function call(
  url: string,
  method: ApiMethod,
  wire: Wire,
  who: Credentials,
  request: JsonObject,
  options: CallOptions = {},
): Promise<Answer> {
  if (typeof wire !== "string") {
    const { path, body } = restRequest(wire, request);
    return restAnswer(await rest(url, wire.httpMethod, path, { ...who, body, headers: options.headers }));
  }
  const message = readMessage(method.input, request).message;
  const client = clientFor(method.desc.parent, url, wire, who);
  try {
    if (method.desc.methodKind === "server_streaming") {
      const objects: JsonObject[] = [];
      try {
        const stream = client[method.desc.localName]!(message, {
          timeoutMs: options.readMs ?? streamReadMs,
          headers: options.headers,
        }) as AsyncIterable<Message>;
        for await (const item of stream) {
          objects.push(writeMessage(item, method.desc.output));
          if (options.until?.(objects.at(-1)!) === true) break;
        }
      } catch (error) {
        // A stream that was accepted runs until its deadline: what it sent by then is its answer.
        if (!(error instanceof ConnectError && error.code === Code.DeadlineExceeded)) throw error;
      }
      return { ok: true, objects, text: JSON.stringify(objects) };
    }
    const answer = writeMessage(
      (await client[method.desc.localName]!(message, { headers: options.headers })) as Message,
      method.desc.output,
    );
    return { ok: true, objects: [answer], text: JSON.stringify(answer) };
  } catch (error) {
    return rpcFailure(error);
  }
}
