import { readdir } from "node:fs/promises";
import { fileURLToPath, pathToFileURL } from "node:url";
import { getOption, type DescField, type DescFile, type DescMessage, type DescMethod } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { http } from "../../gen/google/api/annotations_pb.js";
import type { HttpRule } from "../../gen/google/api/http_pb.js";
import { type Access, access } from "../../gen/paymentservice/v1/options_pb.js";

/*
 * The API surface the fuzzer attacks, read from the generated descriptors at run time: every file in
 * gen/paymentservice/v1, every service in it, every method and every google.api.http binding. A new
 * RPC, route or field is fuzzed the day it is generated, without anyone listing it here.
 */

/** Where the generated descriptors of our own package live. */
const generatedDirectory = new URL("../../gen/paymentservice/v1/", import.meta.url);

/** One segment of a REST path template: a literal, or a path variable bound to an input field. */
export type RouteSegment = { readonly literal: string } | { readonly variable: DescField };

/** One REST binding of an RPC, from its google.api.http rule or one of its additional_bindings. */
export interface RestRoute {
  /** Upper-case HTTP method, e.g. POST. */
  readonly httpMethod: string;
  /** The template as written in the proto, e.g. `/payments/{payment_id}/capture`. */
  readonly template: string;
  readonly segments: readonly RouteSegment[];
  /** `body: "*"`: the JSON body is the input message; otherwise parameters come from the query. */
  readonly takesBody: boolean;
  readonly method: ApiMethod;
}

/** An RPC with everything the fuzzer derives from its descriptor. */
export interface ApiMethod {
  readonly desc: DescMethod;
  /** `/paymentservice.v1.PaymentService/CreatePayment`: the Connect, gRPC and gRPC-Web path. */
  readonly rpcPath: string;
  readonly input: DescMessage;
  /** NO_SIDE_EFFECTS methods also answer Connect GET requests. */
  readonly sideEffectFree: boolean;
  /** Who may call it, so most generated requests carry the key that gets past authentication. */
  readonly access: Access;
  readonly routes: readonly RestRoute[];
  /** snake_case names of every field in the input message tree: an IR_04/IR_05 message names one. */
  readonly fieldNames: ReadonlySet<string>;
}

/** Every method and REST route of the API. */
export interface ApiSchema {
  readonly methods: readonly ApiMethod[];
  readonly routes: readonly RestRoute[];
  /** Field names of all input messages together, for requests whose method is not known. */
  readonly allFieldNames: ReadonlySet<string>;
}

/** Imports every generated `*_pb.ts` of the package and collects its services, methods and routes. */
export async function loadApiSchema(): Promise<ApiSchema> {
  const files = new Map<string, DescFile>();
  for (const name of (await readdir(fileURLToPath(generatedDirectory))).filter((n) => n.endsWith("_pb.ts")).sort()) {
    const module = (await import(pathToFileURL(fileURLToPath(new URL(name, generatedDirectory))).href)) as Record<string, unknown>;
    for (const [exported, value] of Object.entries(module)) {
      if (exported.startsWith("file_") && isDescFile(value)) files.set(value.name, value);
    }
  }
  const methods = [...files.values()].flatMap((file) => file.services.flatMap((service) => service.methods.map(describeMethod)));
  if (methods.length === 0) throw new Error(`no services found in ${fileURLToPath(generatedDirectory)}`);
  return {
    methods,
    routes: methods.flatMap((m) => m.routes),
    allFieldNames: new Set(methods.flatMap((m) => [...m.fieldNames])),
  };
}

function isDescFile(value: unknown): value is DescFile {
  return typeof value === "object" && value !== null && (value as { kind?: unknown }).kind === "file";
}

function describeMethod(desc: DescMethod): ApiMethod {
  const routes: RestRoute[] = [];
  const method: ApiMethod = {
    desc,
    rpcPath: `/${desc.parent.typeName}/${desc.name}`,
    input: desc.input,
    sideEffectFree: desc.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS,
    access: getOption(desc, access),
    routes,
    fieldNames: fieldNamesOf(desc.input),
  };
  const rule = getOption(desc, http);
  for (const binding of [rule, ...rule.additionalBindings]) {
    const route = toRoute(binding, method);
    if (route !== undefined) routes.push(route);
  }
  return method;
}

function toRoute(rule: HttpRule, method: ApiMethod): RestRoute | undefined {
  const { pattern } = rule;
  if (pattern.case === undefined) return undefined;
  if (pattern.case === "custom") throw new Error(`${method.rpcPath}: custom http patterns are not fuzzed yet; teach schema.ts`);
  return {
    httpMethod: pattern.case.toUpperCase(),
    template: pattern.value,
    segments: parseTemplate(pattern.value, method),
    takesBody: rule.body !== "",
    method,
  };
}

/** `/payments/{payment_id}/capture` → literal, variable(payment_id), literal. */
function parseTemplate(template: string, method: ApiMethod): RouteSegment[] {
  return template
    .split("/")
    .slice(1)
    .map((part) => {
      const variable = /^\{([a-z0-9_]+)\}$/.exec(part)?.[1];
      if (variable === undefined) {
        if (part.includes("{")) throw new Error(`${method.rpcPath}: path variable ${part} is not fuzzed yet; teach schema.ts`);
        return { literal: part };
      }
      const field = method.input.fields.find((f) => f.name === variable);
      if (field === undefined) throw new Error(`${method.rpcPath}: ${template} names no field ${variable}`);
      return { variable: field };
    });
}

function fieldNamesOf(message: DescMessage, seen = new Set<DescMessage>(), names = new Set<string>()): Set<string> {
  if (seen.has(message)) return names;
  seen.add(message);
  for (const field of message.fields) {
    names.add(field.name);
    if (field.message !== undefined) fieldNamesOf(field.message, seen, names);
  }
  return names;
}
