import { create, fromJson, type DescEnum, type DescField, type DescMessage, type Message, ScalarType } from "@bufbuild/protobuf";
import { reflect, type ReflectList, type ReflectMap, type ReflectMessage } from "@bufbuild/protobuf/reflect";
import { StructSchema, TimestampSchema } from "@bufbuild/protobuf/wkt";

/*
 * A message of any schema with every field set (the first member of each oneof), built from the
 * descriptor alone, so that a new RPC or field reaches the parity suite without anyone writing a
 * value for it. The values are chosen to show what a transport could lose: text outside ASCII,
 * int64 beyond 32 bits, a float with a fraction, a timestamp with milliseconds, an enum's last value,
 * two items in every list and map.
 */

/** Which fields a sample sets: all of them, or only those a REST query string can carry (GET bindings). */
export type SampleScope = "all" | "query";

/** How deep messages nest in a sample: the protos have no deeper request or answer. */
const maxDepth = 4;

/** A message of `schema` with every field `scope` allows set, the same one on every call. */
export function sampleMessage(schema: DescMessage, scope: SampleScope = "all"): Message {
  const message = reflect(schema);
  fill(message, scope, 0);
  return message.message;
}

function fill(message: ReflectMessage, scope: SampleScope, depth: number): void {
  const oneofsSet = new Set<string>();
  for (const field of message.fields) {
    if (field.oneof !== undefined) {
      if (oneofsSet.has(field.oneof.name)) continue;
      oneofsSet.add(field.oneof.name);
    }
    if (scope === "query" && !inQuery(field)) continue;
    setSample(message, field, depth);
  }
}

/** Whether a REST query parameter can carry the field (the transcoder's params.ts). */
function inQuery(field: DescField): boolean {
  if (field.fieldKind === "scalar" || field.fieldKind === "enum") return true;
  if (field.fieldKind === "list") return field.listKind !== "message";
  return field.fieldKind === "message" && field.message.typeName === TimestampSchema.typeName;
}

/** Sets `field` of `message` to its sample, unless it is a message nested deeper than maxDepth. */
function setSample(message: ReflectMessage, field: DescField, depth: number): void {
  switch (field.fieldKind) {
    case "scalar":
      message.set(field, scalarOf(field.scalar, field.name, field.number));
      return;
    case "enum":
      message.set(field, lastValues(field.enum)[0]);
      return;
    case "message": {
      const value = messageOf(field.message, depth);
      if (value !== undefined) message.set(field, value);
      return;
    }
    case "list": {
      const list = message.get(field) as ReflectList;
      for (const i of [1, 2]) {
        if (field.listKind === "scalar") list.add(scalarOf(field.scalar, field.name, field.number + i));
        else if (field.listKind === "enum") list.add(lastValues(field.enum)[i - 1]);
        else {
          const item = messageOf(field.message, depth);
          if (item !== undefined) list.add(item);
        }
      }
      return;
    }
    case "map": {
      const map = message.get(field) as ReflectMap;
      for (const i of [1, 2]) {
        const key = scalarOf(field.mapKey, `${field.name}_key`, i);
        if (field.mapKind === "scalar") map.set(key, scalarOf(field.scalar, field.name, field.number + i));
        else if (field.mapKind === "enum") map.set(key, lastValues(field.enum)[i - 1]);
        else {
          const value = messageOf(field.message, depth);
          if (value !== undefined) map.set(key, value);
        }
      }
      return;
    }
  }
}

/** An enum's last two numbers (the last twice when it has one value besides the zero one). */
function lastValues(desc: DescEnum): [number, number] {
  const numbers = desc.values.map((v) => v.number).filter((n) => n !== 0);
  return [numbers.at(-1)!, numbers.at(-2) ?? numbers.at(-1)!];
}

function messageOf(schema: DescMessage, depth: number): ReflectMessage | undefined {
  if (schema.typeName === TimestampSchema.typeName) {
    // To the millisecond: REST answers write no finer (docs/api-conventions.md), and the service records none.
    return reflect(TimestampSchema, create(TimestampSchema, { seconds: 1_767_225_600n + BigInt(depth), nanos: 123_000_000 }));
  }
  if (schema.typeName === StructSchema.typeName) {
    return reflect(StructSchema, fromJson(StructSchema, { text: "Grüße", number: 2.5, list: [true, null] }));
  }
  if (depth >= maxDepth) return undefined;
  const nested = reflect(schema);
  fill(nested, "all", depth + 1);
  return nested;
}

function scalarOf(scalar: ScalarType, name: string, n: number): unknown {
  switch (scalar) {
    case ScalarType.STRING:
      return `${name}-${n}-Grüße ✓`;
    case ScalarType.BOOL:
      return true;
    case ScalarType.BYTES:
      return new Uint8Array([0, n & 0xff, 0xff]);
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return n + 0.5;
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return 5_000_000_000n + BigInt(n);
    default:
      return n;
  }
}
