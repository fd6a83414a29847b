import { randomUUID } from "node:crypto";
import type { DescEnum, JsonObject, JsonValue } from "@bufbuild/protobuf";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { Address } from "../../gen/paymentservice/v1/common_pb.js";
import { Code } from "@connectrpc/connect";
import { expect } from "vitest";
import { rest, type RestResponse, type RpcProtocol } from "./clients.js";
import { expectExactRestError, expectRpcError } from "./errors.js";
import { newMerchant, type TestMerchant } from "./merchant.js";

/*
 * What the protocol-parity suites (customers, payments, refunds, disputes, payouts) share: each runs the same
 * scenarios over REST and every RPC protocol through a small per-resource Api, and these helpers are
 * the pieces of that set-up that do not depend on the resource.
 */

/** A JSON object under the REST field names: what every parity Api sends and answers, whatever the protocol. */
export type Json = JsonObject;

/** REST lists with a POST body; "rest-get" is the same API listing with GET and query parameters. */
export type Protocol = "rest" | "rest-get" | RpcProtocol;

/** The protocols every parity scenario runs over ("rest-get" is added only where listing is under test). */
export const protocols = ["rest", "connect", "grpc", "grpc-web"] as const;

/** A non-200 REST answer, kept whole so its status and body can be checked. */
export class RestFailure extends Error {
  constructor(readonly response: RestResponse) {
    super(`HTTP ${response.status}: ${JSON.stringify(response.body)}`);
  }
}

/** A REST call as an adapter makes it: the 200 body, or a thrown RestFailure. */
export type RestCall = (method: string, path: string, body?: Json) => Promise<Json>;

/** Calls the REST API with `apiKey`, so a REST adapter answers 200 bodies and throws RestFailure otherwise, as an RPC client throws. */
export function restCaller(url: string, apiKey: string): RestCall {
  return async (method, path, body) => {
    const res = await rest(url, method, path, { apiKey, body });
    if (res.status !== 200) throw new RestFailure(res);
    return res.body;
  };
}

/** A REST adapter's list at `path`: POST with the params as body, or GET with them as the query ("rest-get"). */
export function restList(call: RestCall, listWith: "GET" | "POST", path: string): (params: Json) => Promise<Json> {
  return (params) => (listWith === "POST" ? call("POST", path, params) : call("GET", `${path}${query(params)}`));
}

/** What every parity suite builds from its resource's REST and RPC adapters. */
export interface ParityApis<A> {
  /** The resource's Api over `protocol`, calling with `apiKey`. */
  apiFor(protocol: Protocol, apiKey: string): A;
  /** A fresh merchant (sandbox secret key) and its Api over `protocol`, so each scenario works in a merchant of its own. */
  merchantApi(protocol: Protocol): Promise<{ merchant: TestMerchant; api: A }>;
}

/**
 * The per-protocol entry points of a parity suite: "rest" lists with POST and "rest-get" with GET
 * through the REST adapter, every other protocol goes through the RPC adapter. `url` is read when a
 * merchant is made, as the service starts in beforeAll.
 */
export function parityApis<A>(
  url: () => string,
  restApi: (apiKey: string, listWith: "GET" | "POST") => A,
  rpcApi: (apiKey: string, protocol: RpcProtocol) => A,
): ParityApis<A> {
  const apiFor = (protocol: Protocol, apiKey: string): A =>
    protocol === "rest" ? restApi(apiKey, "POST") : protocol === "rest-get" ? restApi(apiKey, "GET") : rpcApi(apiKey, protocol);
  return {
    apiFor,
    async merchantApi(protocol) {
      const merchant = await newMerchant(url());
      return { merchant, api: apiFor(protocol, merchant.apiKey) };
    },
  };
}

/** `params` as a query string ("" when there are none), so a GET list sends what a POST list puts in its body. */
export function query(params: Json): string {
  const search = new URLSearchParams(Object.entries(params).map(([k, v]): [string, string] => [k, String(v)]));
  return search.size === 0 ? "" : `?${search}`;
}

/** The documented word of an enum value (PAYMENT_STATUS_REQUIRES_CAPTURE → requires_capture), or null when unset, so RPC answers compare with REST ones. */
export function word(desc: DescEnum, prefix: string, value: number | undefined): string | null {
  if (value === undefined || value === 0) return null;
  return desc.value[value]!.name.slice(prefix.length).toLowerCase();
}

/**
 * A REST body as proto JSON, so RPC requests carry what the REST ones do: documented enum words
 * become proto enum names by the prefix `enumPrefixes` gives each enum field (other values, numbers
 * included, pass as they are).
 */
export function protoJson(body: Json, enumPrefixes: Record<string, string>): Json {
  return Object.fromEntries(
    Object.entries(body).map(([key, value]): [string, JsonValue] => [
      key,
      typeof value === "string" && key in enumPrefixes ? enumPrefixes[key] + value.toUpperCase() : value,
    ]),
  );
}

/** A protobuf timestamp as the ISO string REST answers with, or null when unset. */
export function iso(timestamp: Timestamp | undefined): string | null {
  return timestamp === undefined ? null : timestampDate(timestamp).toISOString();
}

/** An address message (customers, payout billing) under the REST field names, unset fields as null. */
export function addressAsRest(a: Address | undefined): Json | null {
  if (a === undefined) return null;
  return {
    line1: a.line1 ?? null,
    line2: a.line2 ?? null,
    city: a.city ?? null,
    state: a.state ?? null,
    postal_code: a.postalCode ?? null,
    country: a.country ?? null,
  };
}

/** An RPC list page under the REST field names, so list assertions are the same over every protocol. */
export function restPage<T>(page: { data: T[]; totalCount: bigint; hasMore: boolean }, asRest: (item: T) => Json): Json {
  return { data: page.data.map(asRest), total_count: Number(page.totalCount), has_more: page.hasMore };
}

/** A fresh id with `prefix`, so caller-chosen ids never collide between tests sharing a database. */
export const uniqueId = (prefix: string) =>
  // Letters only: a run of 12 or more random digits can pass the Luhn check, and the service masks
  // such runs in its messages as a card number would be (src/card-numbers.ts), which a test would read as a wrong id.
  `${prefix}_${randomUUID()
    .replaceAll("-", "")
    .slice(0, 16)
    .replace(/[0-9]/g, (digit) => "ghijklmnop"[Number(digit)]!)}`;

/** How each error code the parity suites expect reaches REST callers (HTTP status) and RPC callers (Connect code). */
export const errorTransport = {
  IR_00: { http: 501, rpc: Code.Unimplemented },
  IR_01: { http: 401, rpc: Code.Unauthenticated },
  IR_02: { http: 404, rpc: Code.NotFound },
  IR_04: { http: 400, rpc: Code.InvalidArgument },
  IR_05: { http: 400, rpc: Code.InvalidArgument },
  IR_06: { http: 400, rpc: Code.InvalidArgument },
  IR_13: { http: 400, rpc: Code.FailedPrecondition },
  IR_14: { http: 400, rpc: Code.FailedPrecondition },
  IR_16: { http: 400, rpc: Code.FailedPrecondition },
  IR_22: { http: 403, rpc: Code.PermissionDenied },
  HE_01: { http: 409, rpc: Code.AlreadyExists },
  HE_02: { http: 404, rpc: Code.NotFound },
} as const;

/**
 * Asserts that a call failed with the documented code whatever the protocol: over REST the status
 * and an error body with nothing else in it, over RPC the ConnectError code and the
 * paymentservice.v1.ErrorDetail. The message must name every one of `mentions` (usually the
 * offending field). Returns the message.
 */
export async function expectError(call: Promise<unknown>, code: keyof typeof errorTransport, ...mentions: string[]): Promise<string> {
  const failure: unknown = await call.then(
    () => undefined,
    (error: unknown) => error,
  );
  let message: string;
  if (failure instanceof RestFailure) {
    message = expectExactRestError(failure.response, errorTransport[code].http, code);
  } else {
    message = await expectRpcError(Promise.reject(failure ?? new Error("the call should have failed")), errorTransport[code].rpc, code);
  }
  for (const mention of mentions) expect(message).toContain(mention);
  return message;
}
