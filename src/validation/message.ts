import { ScalarType, type DescEnum, type DescField } from "@bufbuild/protobuf";
import type { ReflectList, ReflectMap, ReflectMessage } from "@bufbuild/protobuf/reflect";
import { TimestampSchema, type Timestamp } from "@bufbuild/protobuf/wkt";
import { invalidField } from "../errors.js";
import { checkText } from "./text.js";

/**
 * The rules every request message obeys, applied to every field it carries — scalars, list items,
 * map keys and values, at any depth — whatever the protocol it came in on, so that no route or field
 * can be forgotten. Each error names the field path (e.g. `metadata.note`, `address.city`):
 * - text is well-formed (checkText: IR_06);
 * - an enum holds one of its values: proto enums are open, so a binary or JSON client can send any
 *   number, which no handler could act on (IR_05);
 * - a timestamp lies within 0001-01-01 and 9999-12-31, as proto JSON requires (binary protobuf
 *   carries any seconds and nanos, which no date holds: IR_05).
 */
export function assertWellFormedMessage(message: ReflectMessage, path = ""): void {
  for (const field of message.fields) {
    if (!message.isSet(field)) continue;
    const fieldPath = path === "" ? field.name : `${path}.${field.name}`;
    switch (field.fieldKind) {
      case "scalar":
        checkScalar(field.scalar, message.get(field), fieldPath);
        break;
      case "enum":
        checkEnum(field.enum, message.get(field), fieldPath);
        break;
      case "message":
        checkMessage(message.get(field), fieldPath);
        break;
      case "list":
        checkList(field, message.get(field), fieldPath);
        break;
      case "map":
        checkMap(field, message.get(field), fieldPath);
        break;
    }
  }
}

/** RFC 3339's range, which google.protobuf.Timestamp documents: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z. */
const earliestSecond = -62_135_596_800n;
const latestSecond = 253_402_300_799n;

function checkMessage(message: ReflectMessage, path: string): void {
  if (message.desc.typeName !== TimestampSchema.typeName) {
    assertWellFormedMessage(message, path);
    return;
  }
  const { seconds, nanos } = message.message as Timestamp;
  if (seconds < earliestSecond || seconds > latestSecond || nanos < 0 || nanos > 999_999_999) {
    throw invalidField(path, "expected a time from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z");
  }
}

function checkScalar(scalar: ScalarType, value: unknown, path: string): void {
  if (scalar === ScalarType.STRING) checkText(value as string, path);
}

function checkEnum(desc: DescEnum, value: unknown, path: string): void {
  if (desc.value[value as number] === undefined) throw invalidField(path, `unknown value ${String(value)} of ${desc.typeName}`);
}

function checkList(field: DescField & { fieldKind: "list" }, list: ReflectList, path: string): void {
  let i = 0;
  for (const item of list) {
    const itemPath = `${path}[${i++}]`;
    if (field.listKind === "message") checkMessage(item as ReflectMessage, itemPath);
    else if (field.listKind === "enum") checkEnum(field.enum, item, itemPath);
    else checkScalar(field.scalar, item, itemPath);
  }
}

function checkMap(field: DescField & { fieldKind: "map" }, map: ReflectMap, path: string): void {
  for (const [key, value] of map) {
    if (typeof key === "string") checkText(key, `${path} (a key)`);
    const valuePath = `${path}.${String(key)}`;
    if (field.mapKind === "message") checkMessage(value as ReflectMessage, valuePath);
    else if (field.mapKind === "enum") checkEnum(field.enum, value, valuePath);
    else checkScalar(field.scalar, value, valuePath);
  }
}
