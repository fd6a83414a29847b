import { create, ScalarType, toBinary, type DescField, type DescMessage } from "@bufbuild/protobuf";
import * as fc from "fast-check";
import { presenceFreq } from "./card-numbers.js";
import { hostileText, misplacedCardNumber, type FieldValues } from "./value-arbitraries.js";

/** The init object `create(schema, init)` takes: fields by their TypeScript names. */
export type MessageInit = Record<string, unknown>;

/** Messages nested deeper than this are left empty (google.protobuf.Value and Struct nest each other). */
const maxDepth = 3;

const int64Edges = [-(2n ** 63n), 2n ** 63n - 1n, -1n, 0n, 2n ** 53n + 1n];
const uint64Edges = [0n, 2n ** 64n - 1n, 2n ** 53n + 1n];
const int32Edges = [-2147483648, 2147483647, -1, 0];
const uint32Edges = [0, 4294967295];

/**
 * Messages for the binary protobuf codec, built from the descriptor: plausible field values mixed
 * with every value the wire type allows (unknown enum numbers, int64 extremes, hostile strings).
 */
export class ProtoMessages {
  private readonly inits = new Map<string, fc.Arbitrary<MessageInit>>();

  constructor(private readonly values: FieldValues) {}

  /** An init object for `desc`, ready for create(). */
  init(desc: DescMessage, depth = 0): fc.Arbitrary<MessageInit> {
    const cacheKey = `${depth} ${desc.typeName}`;
    let arbitrary = this.inits.get(cacheKey);
    if (arbitrary === undefined) {
      arbitrary = depth > maxDepth ? fc.constant({}) : this.build(desc, depth);
      this.inits.set(cacheKey, arbitrary);
    }
    return arbitrary;
  }

  private build(desc: DescMessage, depth: number): fc.Arbitrary<MessageInit> {
    const members = desc.members.map((member) => {
      const value =
        member.kind === "oneof"
          ? fc.oneof(...member.fields.map((f) => this.value(f, depth).map((v) => ({ case: f.localName, value: v }))))
          : this.value(member, depth);
      const freq = member.kind === "oneof" ? 2 : presenceFreq(member);
      return fc.option(fc.tuple(fc.constant(member.localName), value), { nil: undefined, freq });
    });
    return fc.tuple(...members).map((entries) => Object.fromEntries(entries.filter((e) => e !== undefined)));
  }

  private value(field: DescField, depth: number): fc.Arbitrary<unknown> {
    switch (field.fieldKind) {
      case "scalar":
        return this.scalar(field.scalar, field.name);
      case "enum":
        return fc.oneof(
          { weight: 4, arbitrary: fc.constantFrom(...field.enum.values.map((v) => v.number)) },
          { weight: 1, arbitrary: fc.constantFrom(99, -1, 2147483647) },
        );
      case "message":
        return this.singular(field.message, depth);
      case "list":
        return fc.array(
          field.listKind === "scalar"
            ? this.scalar(field.scalar, field.name)
            : field.listKind === "enum"
              ? fc.nat(5)
              : this.singular(field.message, depth),
          { maxLength: 3 },
        );
      case "map":
        return fc.dictionary(
          this.values.metadataKey,
          field.mapKind === "scalar"
            ? this.scalar(field.scalar, field.name)
            : field.mapKind === "enum"
              ? fc.nat(5)
              : this.singular(field.message, depth),
          { maxKeys: 4, noNullPrototype: true },
        );
    }
  }

  private singular(desc: DescMessage, depth: number): fc.Arbitrary<unknown> {
    if (desc.typeName === "google.protobuf.Timestamp") {
      return fc.oneof(
        {
          weight: 4,
          arbitrary: fc
            .integer({ min: -30 * 86_400, max: 30 * 86_400 })
            .map((offset) => ({ seconds: BigInt(Math.floor(Date.now() / 1000) + offset), nanos: 0 })),
        },
        {
          weight: 1,
          arbitrary: fc.constantFrom(
            { seconds: 2n ** 62n, nanos: 0 },
            { seconds: -(2n ** 62n), nanos: 0 },
            { seconds: 0n, nanos: -1 },
            { seconds: 0n, nanos: 1_000_000_000 },
          ),
        },
      );
    }
    return this.init(desc, depth + 1);
  }

  private scalar(type: ScalarType, fieldName: string): fc.Arbitrary<unknown> {
    switch (type) {
      case ScalarType.STRING:
        return fc.oneof(
          { weight: 6, arbitrary: this.values.text(fieldName) },
          { weight: 1, arbitrary: fieldName === "card_number" ? hostileText : fc.oneof(hostileText, misplacedCardNumber) },
        );
      case ScalarType.BOOL:
        return fc.boolean();
      case ScalarType.BYTES:
        return fc.uint8Array({ maxLength: 32 });
      case ScalarType.DOUBLE:
      case ScalarType.FLOAT:
        return fc.double();
      case ScalarType.INT64:
      case ScalarType.SINT64:
      case ScalarType.SFIXED64:
        return fc.oneof(
          { weight: 4, arbitrary: this.values.integer(fieldName).map(BigInt) },
          { weight: 1, arbitrary: fc.constantFrom(...int64Edges) },
        );
      case ScalarType.UINT64:
      case ScalarType.FIXED64:
        return fc.oneof(
          { weight: 4, arbitrary: this.values.integer(fieldName).map(BigInt) },
          { weight: 1, arbitrary: fc.constantFrom(...uint64Edges) },
        );
      case ScalarType.UINT32:
      case ScalarType.FIXED32:
        return fc.oneof(
          { weight: 4, arbitrary: this.values.integer(fieldName) },
          { weight: 1, arbitrary: fc.constantFrom(...uint32Edges) },
        );
      default:
        return fc.oneof({ weight: 4, arbitrary: this.values.integer(fieldName) }, { weight: 1, arbitrary: fc.constantFrom(...int32Edges) });
    }
  }
}

/** The binary encoding of a message built from `init`. */
export function encodeMessage(desc: DescMessage, init: MessageInit): Uint8Array {
  return toBinary(desc, create(desc, init));
}
