import { ScalarType, type DescField, type JsonValue } from "@bufbuild/protobuf";
import type { ReflectMessage } from "@bufbuild/protobuf/reflect";
import { invalidField, invalidRequest } from "../../errors.js";
import { invalidValue, mergeMessage } from "../../rest-json/codec.js";

/**
 * Sets the path variables of a matched route. They are applied last, so a path variable wins over
 * the same field in the body (as in the HttpRule specification).
 */
export function applyPathVariables(target: ReflectMessage, fields: DescField[], raw: string[]): void {
  fields.forEach((field, i) => {
    let value: string;
    try {
      value = decodeURIComponent(raw[i]!);
    } catch {
      throw invalidField(field.name, "the path segment is not valid percent-encoding");
    }
    target.set(field, value);
  });
}

/**
 * Applies query parameters (`?limit=10&status=succeeded`) to a request without a body. Query values
 * are text, so each is first turned into the JSON value its field expects, then read by the same
 * codec as a body, which gives the same errors for the same mistakes.
 */
export function applyQuery(target: ReflectMessage, query: URLSearchParams): void {
  const json: Record<string, JsonValue> = {};
  for (const key of new Set(query.keys())) {
    const field = target.desc.fields.find((f) => f.name === key);
    if (field === undefined) {
      throw invalidRequest(`Unknown query parameter: ${key}`);
    }
    const values = query.getAll(key);
    if (field.fieldKind === "list") {
      json[key] = values.map((v) => queryValue(field, v));
    } else if (values.length > 1) {
      throw invalidValue(field, key, "the query parameter is given more than once");
    } else {
      json[key] = queryValue(field, values[0]!);
    }
  }
  mergeMessage(target, json);
}

function queryValue(field: DescField, text: string): JsonValue {
  const scalar = field.fieldKind === "scalar" || (field.fieldKind === "list" && field.listKind === "scalar") ? field.scalar : undefined;
  if (field.fieldKind === "map" || (field.fieldKind === "message" && field.message.typeName !== "google.protobuf.Timestamp")) {
    throw invalidValue(field, field.name, "this field cannot be given as a query parameter");
  }
  switch (scalar) {
    case undefined:
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return text;
    case ScalarType.BOOL:
      return text === "true" ? true : text === "false" ? false : text;
    default:
      return /^-?\d+(\.\d+)?$/.test(text) ? Number(text) : text;
  }
}
