import type { JsonReadOptions, JsonWriteOptions } from "@bufbuild/protobuf";
import { checkText } from "../validation/text.js";

/** Strict UTF-8: bytes that are not UTF-8 are refused, not read with replacement characters. */
const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Refuses a JSON value holding a key or string that is not well-formed text (checkText), naming
 * where by the JSON keys as sent. Iterative, so a body nested thousands deep cannot exhaust the stack.
 */
function checkJsonText(root: unknown): void {
  const pending: [unknown, string][] = [[root, ""]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [value, path] = next;
    if (typeof value === "string") {
      checkText(value, path);
    } else if (Array.isArray(value)) {
      for (const [i, item] of value.entries()) pending.push([item, `${path}[${i}]`]);
    } else if (typeof value === "object" && value !== null) {
      for (const [key, item] of Object.entries(value)) {
        const keyPath = path === "" ? key.slice(0, 100) : `${path}.${key.slice(0, 100)}`;
        checkText(key, `${path === "" ? "(a top-level key)" : `${path} (a key)`}`);
        pending.push([item, keyPath]);
      }
    }
  }
}

/**
 * How connect's JSON codecs (Connect JSON, gRPC+json, gRPC-Web+json) read request bytes as text,
 * given to connect as its `jsonOptions.textDecoder`: strict UTF-8, as the REST dialect reads it,
 * and the text rule on every key and string before protobuf-es parses the JSON. protobuf-es refuses
 * an unpaired surrogate in a value, but quotes an unknown key as it is, and connect cannot put such
 * a key into a gRPC status message at all (encodeURIComponent throws): it must be refused here.
 * A body that is not JSON is passed on for protobuf-es to refuse with its own words.
 */
export const rpcJsonTextDecoder = {
  decode(bytes?: Uint8Array): string {
    const text = utf8.decode(bytes);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      return text;
    }
    checkJsonText(json);
    return text;
  },
};

/**
 * The JSON options of every connect codec. Strict, as REST is: an ignored field or enum name would
 * be a request silently misread (a capture method dropped captures the money at once). The text
 * decoder is an option connect reads but does not declare, so the type is widened here.
 */
export const rpcJsonOptions: Partial<JsonReadOptions & JsonWriteOptions> = Object.assign(
  { ignoreUnknownFields: false },
  { textDecoder: rpcJsonTextDecoder },
);
