import { ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { Access } from "../../../gen/paymentservice/v1/options_pb.js";
import type { ApiMethod, ApiSchema } from "../../fuzz/schema.js";

/*
 * What the tenancy matrix attacks, classified from the generated descriptors (the fuzz suite's
 * schema, the same google.api.http rules the REST router is built from): every RPC, and in each of
 * them every field that names an object. A new RPC is covered the day it is generated; one whose
 * id field the matrix cannot fill stops the run instead of passing untested.
 */

/** The kinds of object a merchant owns, as their id fields name them. */
export type Kind =
  | "merchant"
  | "profile"
  | "customer"
  | "paymentMethod"
  | "mandate"
  | "payment"
  | "refund"
  | "payout"
  | "dispute"
  | "event"
  | "apiKey"
  | "balanceTransaction";

/** Kinds that live in one environment; merchants and profiles are shared by a merchant's sandbox and production. */
export const environmentKinds: readonly Kind[] = [
  "customer",
  "paymentMethod",
  "mandate",
  "payment",
  "refund",
  "payout",
  "dispute",
  "event",
  "apiKey",
  "balanceTransaction",
];

/**
 * Fields that name an object of any of several kinds, by the kinds they may name: `object`, what an
 * event is about (ListEvents' object_id); `source`, what moved the money (a balance transaction's
 * source_id: a captured payment, a succeeded refund, a dispute, a payout).
 */
export const anyOfKinds = {
  object: ["customer", "paymentMethod", "mandate", "payment", "refund", "payout", "dispute"],
  source: ["payment", "refund", "dispute", "payout"],
} as const satisfies Readonly<Record<string, readonly Kind[]>>;

/** A field naming one of several kinds, see anyOfKinds. */
export type AnyOfKind = keyof typeof anyOfKinds;

/** `job`: a job of the runner on a merchant's object, which only the operator reaches (JobService), so no merchant key may either. */
export type FieldKind = Kind | AnyOfKind | "job";

function isAnyOf(kind: FieldKind): kind is AnyOfKind {
  return Object.hasOwn(anyOfKinds, kind);
}

/** The kinds of object a field of `kind` may name; none for jobs, which no merchant owns. */
export function kindsNamedBy(kind: FieldKind): readonly Kind[] {
  if (kind === "job") return [];
  return isAnyOf(kind) ? anyOfKinds[kind] : [kind];
}

/** Which object each id field names. A field ending in `_id` missing here fails the run, see classify. */
const kindOfField: Readonly<Record<string, FieldKind>> = {
  merchant_id: "merchant",
  profile_id: "profile",
  customer_id: "customer",
  payment_method_id: "paymentMethod",
  mandate_id: "mandate",
  payment_id: "payment",
  refund_id: "refund",
  payout_id: "payout",
  dispute_id: "dispute",
  event_id: "event",
  after_event_id: "event",
  key_id: "apiKey",
  balance_transaction_id: "balanceTransaction",
  object_id: "object",
  source_id: "source",
  job_id: "job",
};

/**
 * What an id field does in its RPC: `target` names the object the call acts on (a path variable),
 * `filter` narrows a list, `chosen` is the id a create call lets the caller pick for the new object,
 * `reference` names another object the call uses (a refund's payment, a stream's starting event).
 */
export type Role = "target" | "filter" | "chosen" | "reference";

/** One id field of an RPC's request. */
export interface IdField {
  readonly field: DescField;
  readonly kind: FieldKind;
  readonly role: Role;
}

/** An RPC as the matrix sees it. */
export interface MatrixRpc {
  readonly api: ApiMethod;
  readonly name: string;
  readonly idFields: readonly IdField[];
  /** The kind a list's `data` holds, for lists; undefined for every other RPC. */
  readonly listOf: Kind | undefined;
  /** The kind a server stream sends, for streams; undefined for every other RPC. */
  readonly streamOf: Kind | undefined;
}

/** The kind of the objects of a message whose first field is its own id (Payment.payment_id), if it is one. */
function ownKind(message: DescMessage): FieldKind | undefined {
  return kindOfField[message.fields[0]?.name ?? ""];
}

/** The merchant kind of a message's objects, if it is one. */
function merchantKind(message: DescMessage): Kind | undefined {
  const kind = ownKind(message);
  return kind === undefined || kind === "job" || isAnyOf(kind) ? undefined : kind;
}

/** Id-looking fields nested inside a request's sub-messages: the matrix fills top-level fields only. */
function nestedIds(message: DescMessage, path: string, seen: Set<DescMessage>): string[] {
  if (seen.has(message)) return [];
  seen.add(message);
  return message.fields.flatMap((field) => {
    if (field.message === undefined || field.message.typeName.startsWith("google.protobuf.")) return [];
    return field.message.fields
      .filter((inner) => inner.name.endsWith("_id"))
      .map((inner) => `${path}${field.name}.${inner.name}`)
      .concat(nestedIds(field.message, `${path}${field.name}.`, seen));
  });
}

/**
 * Classifies every RPC of the schema, or throws naming each one the matrix cannot fill: an id field
 * of an unknown kind, a nested id, or an id that is not a string.
 */
export function classify(schema: ApiSchema): MatrixRpc[] {
  const problems: string[] = [];
  const rpcs = schema.methods.map((api): MatrixRpc => {
    const name = api.desc.name;
    const pathFields = new Set(api.routes.flatMap((route) => route.segments.flatMap((s) => ("variable" in s ? [s.variable.name] : []))));
    const data = api.desc.output.fields.find((f) => f.name === "data" && f.fieldKind === "list" && f.listKind === "message");
    const listed = data?.fieldKind === "list" && data.listKind === "message" ? data.message : undefined;
    const listOf = listed === undefined ? undefined : merchantKind(listed);
    // The operator's list of jobs holds every merchant's: the matrix checks that no merchant key gets an answer at all.
    const operatorList = listed !== undefined && ownKind(listed) === "job" && api.access === Access.ADMIN;
    if (data !== undefined && listOf === undefined && !operatorList) problems.push(`${name}: lists objects of an unknown kind`);
    for (const nested of nestedIds(api.input, "", new Set())) problems.push(`${name}: nested id field ${nested}`);
    const idFields = api.input.fields.flatMap((field): IdField[] => {
      if (!field.name.endsWith("_id")) return [];
      const kind = kindOfField[field.name];
      const unreachable = kind === "job" && api.access !== Access.ADMIN;
      if (kind === undefined || unreachable || field.fieldKind !== "scalar" || field.scalar !== ScalarType.STRING) {
        problems.push(`${name}: id field ${field.name} names an object the tenancy matrix cannot fill`);
        return [];
      }
      const role: Role = pathFields.has(field.name)
        ? "target"
        : data !== undefined
          ? "filter"
          : field.name === api.desc.output.fields[0]?.name
            ? "chosen"
            : "reference";
      return [{ field, kind, role }];
    });
    const streamOf = api.desc.methodKind === "server_streaming" ? merchantKind(api.desc.output) : undefined;
    if (api.desc.methodKind === "server_streaming" && streamOf === undefined) problems.push(`${name}: streams objects of an unknown kind`);
    return { api, name, idFields, listOf, streamOf };
  });
  for (const rpc of rpcs) {
    if (rpc.api.desc.methodKind !== "unary" && rpc.api.desc.methodKind !== "server_streaming") {
      problems.push(`${rpc.name}: a ${rpc.api.desc.methodKind} RPC; teach the tenancy matrix to call it`);
    }
  }
  if (problems.length > 0) throw new Error(`the tenancy matrix cannot classify every RPC; teach it:\n${problems.join("\n")}`);
  return rpcs;
}
