import { randomUUID } from "node:crypto";
import type { DescEnum, JsonObject } from "@bufbuild/protobuf";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { expect } from "vitest";
import { rest, type RestResponse } from "./clients.js";
import { type DocumentedCode, documentedErrors, expectExactRestError, expectRpcError } from "./errors.js";

/*
 * Helpers shared by the resource suites (customers, payments, refunds, disputes, payouts, events),
 * whose scenarios run once over REST through a small per-resource REST Api, and by the tests that
 * call the RPC protocols beside REST: documented errors whatever the protocol, RPC enum values and
 * timestamps as REST shows them.
 */

/** A JSON object under the REST field names: what a REST Api sends and answers. */
export type Json = JsonObject;

/** REST and every RPC protocol, for the tests that compare them. */
export const protocols = ["rest", "connect", "grpc", "grpc-web"] as const;

/** A non-200 REST answer, kept whole so its status and body can be checked. */
export class RestFailure extends Error {
  constructor(readonly response: RestResponse) {
    super(`HTTP ${response.status}: ${JSON.stringify(response.body)}`);
  }
}

/** A REST call as a REST Api makes it: the 200 body, or a thrown RestFailure. */
export type RestCall = (method: string, path: string, body?: Json) => Promise<Json>;

/** Calls the REST API with `apiKey`: 200 bodies are answered, anything else is thrown as a RestFailure. */
export function restCaller(url: string, apiKey: string): RestCall {
  return async (method, path, body) => {
    const res = await rest(url, method, path, { apiKey, body });
    if (res.status !== 200) throw new RestFailure(res);
    return res.body;
  };
}

/** A REST Api's list at `path`: POST with the params as body, or GET with them as the query. */
export function restList(call: RestCall, listWith: "GET" | "POST", path: string): (params: Json) => Promise<Json> {
  return (params) => (listWith === "POST" ? call("POST", path, params) : call("GET", `${path}${query(params)}`));
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

/** A protobuf timestamp as the ISO string REST answers with, or null when unset. */
export function iso(timestamp: Timestamp | undefined): string | null {
  return timestamp === undefined ? null : timestampDate(timestamp).toISOString();
}

/** A fresh id with `prefix`, so caller-chosen ids never collide between tests sharing a database. */
export const uniqueId = (prefix: string) =>
  // Letters only: a run of 12 or more random digits can pass the Luhn check, and the service masks
  // such runs in its messages as a card number would be (src/card-numbers.ts), which a test would read as a wrong id.
  `${prefix}_${randomUUID()
    .replaceAll("-", "")
    .slice(0, 16)
    .replace(/[0-9]/g, (digit) => "ghijklmnop"[Number(digit)]!)}`;

/**
 * Asserts that a call failed with the documented code whatever the protocol: over REST the status
 * and an error body with nothing else in it, over RPC the ConnectError code and the
 * paymentservice.v1.ErrorDetail. The message must name every one of `mentions` (usually the
 * offending field). Returns the message.
 */
export async function expectError(call: Promise<unknown>, code: DocumentedCode, ...mentions: string[]): Promise<string> {
  const failure: unknown = await call.then(
    () => undefined,
    (error: unknown) => error,
  );
  let message: string;
  if (failure instanceof RestFailure) {
    message = expectExactRestError(failure.response, documentedErrors[code].http, code);
  } else {
    message = await expectRpcError(Promise.reject(failure ?? new Error("the call should have failed")), documentedErrors[code].rpc, code);
  }
  for (const mention of mentions) expect(message).toContain(mention);
  return message;
}
