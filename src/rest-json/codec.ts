import { timestampToDate } from "../validation/time.js";
import {
  ScalarType,
  create,
  fromJson,
  getOption,
  toJson,
  type DescEnum,
  type DescField,
  type DescMessage,
  type JsonValue,
  type Message,
} from "@bufbuild/protobuf";
import { reflect, type ReflectList, type ReflectMap, type ReflectMessage } from "@bufbuild/protobuf/reflect";
import { FeatureSet_FieldPresence, StructSchema, TimestampSchema, type Timestamp } from "@bufbuild/protobuf/wkt";
import { invalid_value_code as invalidValueCode } from "../../gen/paymentservice/v1/options_pb.js";
import { enumNumber, enumWord } from "../enum-words.js";
import { checkText } from "../validation/text.js";
import { type ApiError, describeValue, errorCatalogue, invalidField, invalidRequest, type ErrorCode } from "../errors.js";

/*
 * The REST dialect of our JSON (decisions §1, issue "REST dialect"): snake_case keys, int64 as JSON
 * numbers, enums as the documented lower-case words, ISO 8601 UTC timestamps, null for an absent
 * optional value. Connect clients keep standard proto JSON; only this module speaks the dialect.
 */

/** Largest integer the REST dialect accepts, so that JSON numbers never lose precision. */
const maxSafe = BigInt(Number.MAX_SAFE_INTEGER);

function enumWords(desc: DescEnum): string {
  return desc.values.flatMap((v) => (v.number === 0 ? [] : [enumWord(desc, v.number)])).join(", ");
}

/**
 * Reads a REST JSON object into a message of `schema`, naming the exact field path (e.g.
 * `address.country`) in every error. `null` is the same as absent. Unknown keys are IR_06.
 */
export function readMessage(schema: DescMessage, json: unknown, path = ""): ReflectMessage {
  const target = reflect(schema);
  mergeMessage(target, json, path);
  return target;
}

/** Merges a REST JSON object into an existing message (used to combine body, path and query). */
export function mergeMessage(target: ReflectMessage, json: unknown, path = ""): void {
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw path === ""
      ? invalidRequest("The request body must be a JSON object")
      : invalidField(path, `expected an object, got ${describeValue(json)}`);
  }
  for (const [key, value] of Object.entries(json)) {
    const field = target.desc.fields.find((f) => f.name === key);
    const fieldPath = path === "" ? key : `${path}.${key}`;
    if (field === undefined) {
      throw invalidRequest(`Unknown field: ${fieldPath}`);
    }
    if (value !== null) {
      setField(target, field, value, fieldPath);
    }
  }
}

function setField(target: ReflectMessage, field: DescField, value: unknown, path: string): void {
  switch (field.fieldKind) {
    case "scalar":
      target.set(field, readScalar(field, field.scalar, value, path));
      return;
    case "enum":
      target.set(field, readEnum(field, field.enum, value, path));
      return;
    case "message":
      target.set(field, readSingular(field, field.message, value, path));
      return;
    case "list": {
      if (!Array.isArray(value)) {
        throw invalidValue(field, path, `expected an array, got ${describeValue(value)}`);
      }
      const list = target.get(field) as ReflectList;
      value.forEach((item, i) => {
        const itemPath = `${path}[${i}]`;
        if (field.listKind === "scalar") list.add(readScalar(field, field.scalar, item, itemPath));
        else if (field.listKind === "enum") list.add(readEnum(field, field.enum, item, itemPath));
        else list.add(readSingular(field, field.message, item, itemPath));
      });
      return;
    }
    case "map": {
      if (typeof value !== "object" || Array.isArray(value)) {
        throw invalidValue(field, path, `expected an object, got ${describeValue(value)}`);
      }
      const map = target.get(field) as ReflectMap;
      for (const [key, item] of Object.entries(value as object)) {
        checkText(key, `${path} (a key)`);
        const itemPath = `${path}.${key}`;
        if (field.mapKind === "scalar") map.set(key, readScalar(field, field.scalar, item, itemPath));
        else if (field.mapKind === "enum") map.set(key, readEnum(field, field.enum, item, itemPath));
        else map.set(key, readSingular(field, field.message, item, itemPath));
      }
      return;
    }
  }
}

/**
 * The error for a value `field` cannot take: IR_05 naming the field, or the code the field declares
 * with `(invalid_value_code)` in the protos (a list's limit is IR_06, decisions §7).
 */
export function invalidValue(field: DescField, path: string, expectation: string): ApiError {
  const declared = getOption(field, invalidValueCode);
  if (declared === "" || !(declared in errorCatalogue)) return invalidField(path, expectation);
  return invalidField(path, expectation, declared as ErrorCode);
}

function readSingular(field: DescField, schema: DescMessage, value: unknown, path: string): ReflectMessage {
  if (schema.typeName === TimestampSchema.typeName) {
    return reflect(TimestampSchema, readTimestamp(field, value, path));
  }
  if (schema.typeName === StructSchema.typeName) {
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      throw invalidValue(field, path, `expected an object, got ${describeValue(value)}`);
    }
    return reflect(StructSchema, fromJson(StructSchema, value as JsonValue));
  }
  return readMessage(schema, value, path);
}

/** ISO 8601 with a date, a time and an explicit zone, so that no value depends on the server's zone. */
const isoTimestamp = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(?:Z|([+-])(\d{2}):(\d{2}))$/;

/**
 * Parses an ISO 8601 timestamp with a zone, to the nanosecond; anything else is IR_05 naming the
 * field. A date no calendar has (February 30th, hour 24) is refused: `Date` would roll it over into
 * another day without a word.
 */
function readTimestamp(field: DescField, value: unknown, path: string): Timestamp {
  const parts = typeof value === "string" ? isoTimestamp.exec(value) : null;
  const seconds = parts === null ? undefined : epochSecondsOf(parts);
  if (parts === null || seconds === undefined) {
    throw invalidValue(field, path, `expected an ISO 8601 timestamp such as 2026-01-31T12:00:00Z, got ${describeValue(value)}`);
  }
  return create(TimestampSchema, { seconds, nanos: Number((parts[7] ?? "").padEnd(9, "0")) });
}

/** The seconds since the epoch of a matched `isoTimestamp`, or undefined when no calendar has that date and time. */
function epochSecondsOf(parts: RegExpExecArray): bigint | undefined {
  const [year, month, day, hour, minute, second] = parts.slice(1, 7).map((part) => Number(part ?? 0)) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const [offsetHours, offsetMinutes] = [Number(parts[9] ?? 0), Number(parts[10] ?? 0)];
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second);
  const exists =
    date.getUTCFullYear() === year &&
    date.getUTCMonth() === month - 1 &&
    date.getUTCDate() === day &&
    date.getUTCHours() === hour &&
    date.getUTCMinutes() === minute &&
    date.getUTCSeconds() === second &&
    offsetHours <= 23 &&
    offsetMinutes <= 59;
  if (!exists) return undefined;
  const offsetSeconds = (parts[8] === "-" ? -1 : 1) * (offsetHours * 3600 + offsetMinutes * 60);
  return BigInt(date.getTime() / 1000 - offsetSeconds);
}

function readEnum(field: DescField, desc: DescEnum, value: unknown, path: string): number {
  const number = typeof value === "string" ? enumNumber(desc, value) : undefined;
  if (number === undefined) {
    throw invalidValue(field, path, `expected one of ${enumWords(desc)}, got ${describeValue(value)}`);
  }
  return number;
}

function readScalar(field: DescField, type: ScalarType, value: unknown, path: string): unknown {
  switch (type) {
    case ScalarType.STRING:
      if (typeof value !== "string") throw invalidValue(field, path, `expected a string, got ${describeValue(value)}`);
      checkText(value, path);
      return value;
    case ScalarType.BOOL:
      if (typeof value !== "boolean") throw invalidValue(field, path, `expected true or false, got ${describeValue(value)}`);
      return value;
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      if (typeof value !== "number") throw invalidValue(field, path, `expected a number, got ${describeValue(value)}`);
      return value;
    case ScalarType.BYTES:
      if (typeof value !== "string") throw invalidValue(field, path, `expected a base64 string, got ${describeValue(value)}`);
      return new Uint8Array(Buffer.from(value, "base64"));
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return BigInt(readInteger(field, value, path, -Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER));
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return readInteger(field, value, path, 0, 0xffffffff);
    default:
      return readInteger(field, value, path, -0x80000000, 0x7fffffff);
  }
}

/**
 * An integer within what the field's wire type holds. The bounds are the wire's, not the API's, so
 * they are not quoted: the API's own range for the field (an amount, a limit) is checked where the
 * field is used, and says it.
 */
function readInteger(field: DescField, value: unknown, path: string, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value)) {
    throw invalidValue(field, path, `expected an integer, got ${describeValue(value)}`);
  }
  if (value < min || value > max) throw invalidValue(field, path, "the integer is out of range");
  return value;
}

/**
 * Writes a message in the REST dialect. Every field is present: an unset optional field or message is
 * `null`, so clients see one stable shape per resource.
 */
export function writeMessage(message: ReflectMessage | Message, schema?: DescMessage): Record<string, JsonValue> {
  const source = schema === undefined ? (message as ReflectMessage) : reflect(schema, message as Message);
  const json: Record<string, JsonValue> = {};
  for (const field of source.fields) {
    json[field.name] = writeField(source, field);
  }
  return json;
}

function writeField(source: ReflectMessage, field: DescField): JsonValue {
  switch (field.fieldKind) {
    case "scalar":
      return field.presence !== FeatureSet_FieldPresence.IMPLICIT && !source.isSet(field)
        ? null
        : writeScalar(field.scalar, source.get(field));
    case "enum":
      return enumWord(field.enum, source.get(field));
    case "message":
      return source.isSet(field) ? writeSingular(field.message, source.get(field)) : null;
    case "list": {
      const list = source.get(field);
      const out: JsonValue[] = [];
      for (const item of list) {
        if (field.listKind === "scalar") out.push(writeScalar(field.scalar, item));
        else if (field.listKind === "enum") out.push(enumWord(field.enum, item as number));
        else out.push(writeSingular(field.message, item as ReflectMessage));
      }
      return out;
    }
    case "map": {
      const out: Record<string, JsonValue> = {};
      for (const [key, item] of source.get(field)) {
        const name = String(key);
        if (field.mapKind === "scalar") out[name] = writeScalar(field.scalar, item);
        else if (field.mapKind === "enum") out[name] = enumWord(field.enum, item as number);
        else out[name] = writeSingular(field.message, item as ReflectMessage);
      }
      return out;
    }
  }
}

function writeSingular(schema: DescMessage, value: ReflectMessage): JsonValue {
  if (schema.typeName === TimestampSchema.typeName) {
    return timestampToDate(value.message as Timestamp).toISOString();
  }
  if (schema.typeName === StructSchema.typeName) {
    return toJson(StructSchema, value.message as never);
  }
  return writeMessage(value);
}

function writeScalar(type: ScalarType, value: unknown): JsonValue {
  if (typeof value === "bigint") {
    // Amounts are bounded far below 2^53 by validation; a wider value would be a server bug.
    if (value > maxSafe || value < -maxSafe) throw new Error(`int64 value ${value} is not a safe JSON number`);
    return Number(value);
  }
  if (type === ScalarType.BYTES) {
    return Buffer.from(value as Uint8Array).toString("base64");
  }
  return value as JsonValue;
}
