import { ScalarType, type DescEnum, type DescField, type DescMessage } from "@bufbuild/protobuf";
import * as fc from "fast-check";
import { presenceFreq } from "./card-numbers.js";
import { RawJson, type JsonTree } from "./json-text.js";
import {
  deeplyNested,
  hostileNumber,
  hostileText,
  hostileTimestamp,
  misplacedCardNumber,
  plausibleTimestamp,
  type FieldValues,
} from "./value-arbitraries.js";

/**
 * The two JSON dialects the port speaks: REST (snake_case, int64 as numbers, enums as lower-case
 * words, ISO timestamps) and standard proto JSON for Connect and gRPC's JSON codec (camelCase or
 * proto names, int64 as strings or numbers, enums by value name or number).
 */
export type JsonDialect = "rest" | "proto-json";

/** Messages nested deeper than this are sent empty: no request message of ours nests further. */
const maxDepth = 4;

/** `undefined` most of the time, the value now and then: for rare additions such as unknown fields. */
function rarely<T>(arbitrary: fc.Arbitrary<T>, oneIn: number): fc.Arbitrary<T | undefined> {
  return fc.oneof({ weight: oneIn - 1, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary });
}

/** The documented word of an enum value: its name without the enum's shared prefix, lower-cased. */
function enumWord(desc: DescEnum, number: number): string {
  const value = desc.values.find((v) => v.number === number)!;
  return value.name.slice(desc.sharedPrefix?.length ?? 0).toLowerCase();
}

/**
 * JSON objects for any message, built from its descriptor: every field, whatever its kind, gets
 * mostly plausible values mixed with wrong types, nulls, hostile strings and numbers; unknown fields
 * are added now and then.
 */
export class JsonBodies {
  private readonly messages = new Map<string, fc.Arbitrary<JsonTree>>();

  constructor(private readonly values: FieldValues) {}

  /** A JSON object for `desc` in `dialect`. */
  message(desc: DescMessage, dialect: JsonDialect, depth = 0): fc.Arbitrary<JsonTree> {
    const cacheKey = `${dialect} ${depth} ${desc.typeName}`;
    let arbitrary = this.messages.get(cacheKey);
    if (arbitrary === undefined) {
      arbitrary = depth > maxDepth ? fc.constant({}) : this.buildMessage(desc, dialect, depth);
      this.messages.set(cacheKey, arbitrary);
    }
    return arbitrary;
  }

  /** A plausible value for one field, the way a correct client would send it. */
  plausible(field: DescField, dialect: JsonDialect, depth: number): fc.Arbitrary<JsonTree> {
    switch (field.fieldKind) {
      case "scalar":
        return this.scalar(field.scalar, field.name, dialect);
      case "enum":
        return this.enumValue(field.enum, dialect);
      case "message":
        return this.singular(field.message, dialect, depth);
      case "list": {
        const item =
          field.listKind === "scalar"
            ? this.scalar(field.scalar, field.name, dialect)
            : field.listKind === "enum"
              ? this.enumValue(field.enum, dialect)
              : this.singular(field.message, dialect, depth);
        return fc.array(item, { maxLength: 3 });
      }
      case "map": {
        const value =
          field.mapKind === "scalar"
            ? this.scalar(field.scalar, field.name, dialect)
            : field.mapKind === "enum"
              ? this.enumValue(field.enum, dialect)
              : this.singular(field.message, dialect, depth);
        return fc.dictionary(this.values.metadataKey, value, { maxKeys: 4, noNullPrototype: true });
      }
    }
  }

  private buildMessage(desc: DescMessage, dialect: JsonDialect, depth: number): fc.Arbitrary<JsonTree> {
    const entries = desc.fields.map((field) => {
      const key =
        dialect === "rest" || field.jsonName === field.name ? fc.constant(field.name) : fc.constantFrom(field.jsonName, field.name);
      const value = fc.oneof(
        { weight: 12, arbitrary: this.plausible(field, dialect, depth) },
        { weight: 1, arbitrary: fc.constant(null) },
        { weight: 2, arbitrary: this.hostile(field) },
      );
      return fc.option(fc.tuple(key, value), { nil: undefined, freq: presenceFreq(field) });
    });
    const unknownField = rarely(
      fc.tuple(fc.constantFrom("unknown_field", "__proto__", "constructor", "amount ", "AMOUNT", "Amount"), this.anyJson()),
      12,
    );
    return fc.tuple(fc.tuple(...entries), unknownField).map(([present, extra]) => {
      const object: Record<string, JsonTree> = {};
      // defineProperty, not assignment: an unknown field named __proto__ must become a key of the
      // JSON object rather than replace the object's prototype.
      for (const entry of [...present, extra]) {
        if (entry !== undefined)
          Object.defineProperty(object, entry[0], { value: entry[1], enumerable: true, writable: true, configurable: true });
      }
      return object;
    });
  }

  private scalar(type: ScalarType, fieldName: string, dialect: JsonDialect): fc.Arbitrary<JsonTree> {
    switch (type) {
      case ScalarType.STRING:
        return this.values.text(fieldName);
      case ScalarType.BOOL:
        return fc.boolean();
      case ScalarType.BYTES:
        return fc.uint8Array({ maxLength: 16 }).map((bytes) => Buffer.from(bytes).toString("base64"));
      case ScalarType.DOUBLE:
      case ScalarType.FLOAT:
        return fc.double({ noNaN: true, noDefaultInfinity: true });
      case ScalarType.INT64:
      case ScalarType.UINT64:
      case ScalarType.SINT64:
      case ScalarType.FIXED64:
      case ScalarType.SFIXED64: {
        const integer = this.values.integer(fieldName);
        return dialect === "rest" ? integer : fc.oneof(integer.map(String), integer);
      }
      default:
        return this.values.integer(fieldName);
    }
  }

  private enumValue(desc: DescEnum, dialect: JsonDialect): fc.Arbitrary<JsonTree> {
    const named = desc.values.filter((v) => v.number !== 0);
    if (dialect === "rest") return fc.constantFrom(...named.map((v) => enumWord(desc, v.number)));
    return fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom(...named.map((v) => v.name)) },
      { weight: 1, arbitrary: fc.constantFrom(...desc.values.map((v) => v.number)) },
    );
  }

  private singular(desc: DescMessage, dialect: JsonDialect, depth: number): fc.Arbitrary<JsonTree> {
    if (desc.typeName === "google.protobuf.Timestamp") return plausibleTimestamp;
    if (desc.typeName === "google.protobuf.Struct") return fc.constant({ order: "42", nested: { list: [1, "two", null] } });
    return this.message(desc, dialect, depth + 1);
  }

  /** What a careless or malicious client puts in a field: wrong types, edge values, deep nesting. */
  private hostile(field: DescField): fc.Arbitrary<JsonTree> {
    const texts: fc.Arbitrary<JsonTree>[] = [hostileText];
    // A card number in card_number itself is plausible, not misplaced; keeping the two sets apart
    // keeps the leak check sound.
    if (field.name !== "card_number") texts.push(misplacedCardNumber);
    const wrongKinds: fc.Arbitrary<JsonTree>[] = [
      hostileNumber,
      fc.boolean(),
      fc.constantFrom<JsonTree>([], {}, [null], { "": "" }),
      fc.constantFrom("100", "abc", "true", "manual", "MANUAL", "CAPTURE_METHOD_MANUAL", "unspecified", "1"),
    ];
    if (field.fieldKind === "message" && field.message.typeName === "google.protobuf.Timestamp") wrongKinds.push(hostileTimestamp);
    if (field.fieldKind === "map") wrongKinds.push(this.hostileMap());
    return fc.oneof(
      { weight: 3, arbitrary: fc.oneof(...texts) },
      { weight: 3, arbitrary: fc.oneof(...wrongKinds) },
      { weight: 1, arbitrary: deeplyNested },
    );
  }

  /** Maps beyond the documented limits: 51 keys, long keys and values, values that are not strings. */
  private hostileMap(): fc.Arbitrary<JsonTree> {
    return fc.oneof(
      fc.constant(Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, "v"]))),
      fc.constant({ ["k".repeat(41)]: "v" }),
      fc.constant({ order: "v".repeat(501) }),
      fc.dictionary(this.values.metadataKey, this.anyJson(), { maxKeys: 3, noNullPrototype: true }),
    );
  }

  /** Any JSON value at all, for unknown fields and wrongly typed map values. */
  private anyJson(): fc.Arbitrary<JsonTree> {
    return fc.oneof(hostileNumber, hostileText, fc.boolean(), fc.constant(null), fc.constant({ a: [1, { b: null }] }), deeplyNested);
  }
}

/** Top-level bodies that are JSON but not an object. */
export const nonObjectJson: fc.Arbitrary<JsonTree> = fc.constantFrom<JsonTree>([], null, "body", 1, true, [{}], new RawJson("  "));
