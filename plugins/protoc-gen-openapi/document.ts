import {
  getOption,
  hasOption,
  ScalarType,
  type DescEnum,
  type DescEnumValue,
  type DescExtension,
  type DescField,
  type DescFile,
  type DescMessage,
  type DescMethod,
  type DescService,
} from "@bufbuild/protobuf";
import type { GenExtension } from "@bufbuild/protobuf/codegenv2";
import { FeatureSet_FieldPresence } from "@bufbuild/protobuf/wkt";
import { getComments } from "@bufbuild/protoplugin";
import { enumWord } from "../../src/enum-words.js";
import { parsePathTemplate } from "../../src/transport/rest/path-template.js";

/*
 * The OpenAPI 3.1 document of the REST dialect (docs/api-conventions.md), built from the same
 * google.api.http rules the transcoder routes by and describing the JSON its codec
 * (src/rest-json/codec.ts) reads and writes: snake_case keys, int64 as JSON numbers, enums as
 * lower-case words, every response key present with null for an unset optional value, unknown
 * request keys refused.
 */

/** A JSON value of the document. */
type Json = string | number | boolean | null | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

/** The parts of google.api.HttpRule read here; the plugin gets it as a message of the request's descriptors. */
interface HttpRule {
  readonly pattern: { readonly case: string | undefined; readonly value?: unknown };
  readonly body: string;
  readonly additionalBindings: HttpRule[];
}

/** One REST binding of a method, as the transcoder serves it. */
interface Binding {
  readonly method: DescMethod;
  readonly httpMethod: "get" | "post" | "put" | "patch" | "delete";
  readonly template: string;
  readonly body: boolean;
  /** Set when the method has several bindings, so each operation gets an id of its own. */
  readonly suffix: string;
}

/** The values of paymentservice.v1.Access the admin key can use (options.proto). */
const adminOnly = "ACCESS_ADMIN";
const adminOrSecret = "ACCESS_ADMIN_OR_SECRET_KEY";

/** Largest integer the REST codec reads or writes for an int64: larger ones would lose precision as JSON numbers. */
const maxSafe = Number.MAX_SAFE_INTEGER;

/** The whole document for the http-annotated methods of `files` (all files of the request, in order). */
export function openApiDocument(files: readonly DescFile[]): JsonObject {
  const extensions = files.flatMap((file) => file.extensions);
  const httpOption = extensions.find((e) => e.typeName === "google.api.http");
  const accessOption = extensions.find((e) => e.typeName === "paymentservice.v1.access");
  const rulesOption = extensions.find((e) => e.typeName === "paymentservice.v1.rules");
  const mediaTypesOption = extensions.find((e) => e.typeName === "paymentservice.v1.rest_media_types");
  if (httpOption === undefined || accessOption === undefined || rulesOption === undefined || mediaTypesOption === undefined) {
    throw new Error(
      "google.api.http, paymentservice.v1.access, paymentservice.v1.rules and paymentservice.v1.rest_media_types must be among the protos",
    );
  }
  const services = files.flatMap((file) => file.services);
  const bindings = services.flatMap((service) => service.methods.flatMap((method) => bindingsOf(method, httpOption)));
  const schemas = new Schemas(new FieldRulesReader(rulesOption));
  const paths: Record<string, JsonObject> = {};
  const tags = new Map<DescService, JsonObject>();
  for (const binding of bindings) {
    const service = binding.method.parent;
    const tag = tagName(bindings.find((b) => b.method.parent === service)!.template);
    if (!tags.has(service)) tags.set(service, withDescription({ name: tag }, service));
    const access = accessOf(binding.method, accessOption);
    paths[binding.template] ??= {};
    const mediaTypes = getOption(binding.method, mediaTypesOption as GenExtension) as unknown as string[];
    paths[binding.template]![binding.httpMethod] = operation(binding, tag, access, schemas, mediaTypes);
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Payment service REST API",
      version: "v1",
      description:
        "The documented JSON REST paths of the payment service, generated from the `google.api.http` rules of its protos " +
        "(the same rules the service routes by). Keys are snake_case, amounts are integers in the smallest currency unit, " +
        "enum values are lower-case words, every documented key of a response is present (`null` when unset), and every " +
        'error is `{"error": {"type", "code", "message", "request_id"}}`. The same operations are served over Connect, gRPC and gRPC-Web.',
      license: { name: "Proprietary", identifier: "LicenseRef-Proprietary" },
    },
    servers: [{ url: "/", description: "The service that serves this document (GET /openapi.json)" }],
    security: [{ apiKey: [] }],
    tags: [...tags.values()],
    paths: sortedKeys(paths),
    components: {
      securitySchemes: {
        apiKey: {
          type: "apiKey",
          in: "header",
          name: "api-key",
          description: "A merchant's API key (`snd_…` sandbox, `prd_…` production; secret or publishable).",
        },
        adminApiKey: {
          type: "apiKey",
          in: "header",
          name: "admin-api-key",
          description: "The operator's admin key (`ADMIN_API_KEY`); without it configured, admin operations answer 401.",
        },
      },
      parameters: {
        IdempotencyKey: {
          name: "X-Idempotency-Key",
          in: "header",
          required: false,
          description:
            "Makes a retry safe: a later request with the same key and the same request replays the first success " +
            "(with `Idempotent-Replayed: true`) instead of running again. 1–255 characters; kept 24 hours. " +
            "Ignored on reads and admin calls.",
          schema: { type: "string", minLength: 1, maxLength: 255 },
        },
      },
      headers: rateLimitHeaders(),
      responses: errorResponses(),
      schemas: sortedKeys({ Error: errorSchema(), ...schemas.all() }),
    },
  };
}

function bindingsOf(method: DescMethod, httpOption: DescExtension): Binding[] {
  const rule = getOption(method, httpOption as GenExtension) as unknown as HttpRule;
  const rules = [rule, ...rule.additionalBindings].filter((r) => r.pattern.case !== undefined);
  return rules.map((r) => {
    const { case: verb, value } = r.pattern;
    if (verb !== "get" && verb !== "post" && verb !== "put" && verb !== "patch" && verb !== "delete") {
      throw new Error(`${method.name}: unsupported http rule pattern ${verb}`);
    }
    return {
      method,
      httpMethod: verb,
      template: value as string,
      body: r.body === "*",
      suffix: rules.length > 1 ? verb[0]!.toUpperCase() + verb.slice(1) : "",
    };
  });
}

/** The Access value name of a method (options.proto), ACCESS_UNSPECIFIED when it sets none. */
function accessOf(method: DescMethod, accessOption: DescExtension): string {
  const number = getOption(method, accessOption as GenExtension) as unknown as number;
  const name = accessOption.fieldKind === "enum" ? accessOption.enum.value[number]?.name : undefined;
  return name ?? "ACCESS_UNSPECIFIED";
}

/** What each Access value means for a caller, in the words of docs/authentication.md. */
const accessNotes: Record<string, string> = {
  ACCESS_UNSPECIFIED: "Needs a merchant's secret key.",
  ACCESS_SECRET_KEY: "Needs a merchant's secret key.",
  ACCESS_ANY_KEY: "Any valid merchant key, publishable keys included.",
  ACCESS_CLIENT_SECRET: "A secret key, or a publishable key together with the object's `client_secret`.",
  ACCESS_ADMIN: "Needs the `admin-api-key`.",
  ACCESS_ADMIN_OR_SECRET_KEY: "The `admin-api-key`, or a merchant's secret key acting on its own merchant.",
  ACCESS_SANDBOX_SECRET_KEY: "Needs a merchant's sandbox secret key (`snd_…`).",
};

/** `/api-keys/{key_id}` → `API keys`: the first segment names the resource a service serves. */
function tagName(template: string): string {
  return sentence(template.split("/")[1]!.split("-"));
}

function operation(binding: Binding, tag: string, access: string, schemas: Schemas, mediaTypes: readonly string[]): JsonObject {
  const { method, httpMethod, template } = binding;
  const pathFields = parsePathTemplate(template, method.input).flatMap((s) => ("variable" in s ? [s.variable] : []));
  const parameters: Json[] = pathFields.map((field) =>
    withDescription({ name: field.name, in: "path", required: true, schema: { type: "string", minLength: 1 } }, field),
  );
  if (!binding.body) {
    for (const field of method.input.fields) {
      if (pathFields.includes(field)) continue;
      const parameter: JsonObject = {
        name: field.name,
        in: "query",
        required: schemas.rules.of(field)?.required === true,
        schema: queryValue(field, schemas),
      };
      parameters.push(withDescription(parameter, field));
    }
  }
  const changes = httpMethod !== "get";
  if (changes) parameters.push({ $ref: "#/components/parameters/IdempotencyKey" });
  const result: JsonObject = {
    tags: [tag],
    operationId: `${method.name}${binding.suffix}`,
    summary: titleOf(method),
    description: `${commentOf(method) ?? ""}\n\n${accessNotes[access] ?? accessNotes.ACCESS_UNSPECIFIED}`.trim(),
    security:
      access === adminOnly ? [{ adminApiKey: [] }] : access === adminOrSecret ? [{ apiKey: [] }, { adminApiKey: [] }] : [{ apiKey: [] }],
  };
  if (parameters.length > 0) result.parameters = parameters;
  if (binding.body) {
    const bodyFields = method.input.fields.filter((f) => !pathFields.includes(f));
    const media: JsonObject = { schema: schemas.request(method.input, pathFields) };
    const example = schemas.rules.exampleOf(bodyFields);
    if (example !== undefined) media.example = example;
    result.requestBody = {
      // A body without a required field is refused, and so is no body at all.
      required: bodyFields.some((f) => schemas.rules.of(f)?.required === true),
      content: { "application/json": media },
    };
  }
  const success: JsonObject = {
    description: `The ${method.output.name} (docs/api-conventions.md: every key present, \`null\` when unset)${
      mediaTypes.length === 0 ? "" : `; as ${mediaTypes.join(" or ")} when the request's \`Accept\` asks for it`
    }.`,
    content: {
      "application/json": { schema: schemas.response(method.output) },
      ...Object.fromEntries(mediaTypes.map((type) => [type, { schema: { type: "string" } }])),
    },
  };
  success.headers = headerRefs();
  result.responses = {
    "200": success,
    "400": { $ref: "#/components/responses/BadRequest" },
    "401": { $ref: "#/components/responses/Unauthorized" },
    "403": { $ref: "#/components/responses/Forbidden" },
    "404": { $ref: "#/components/responses/NotFound" },
    ...(changes ? { "409": { $ref: "#/components/responses/Conflict" }, "422": { $ref: "#/components/responses/Unprocessable" } } : {}),
    "429": { $ref: "#/components/responses/TooManyRequests" },
    "500": { $ref: "#/components/responses/ServerError" },
    "501": { $ref: "#/components/responses/NotImplemented" },
    "503": { $ref: "#/components/responses/Unavailable" },
  };
  return result;
}

/** Words of an operation's title that are acronyms, written as such: `ListApiKeys` is "List API keys". */
const acronyms = new Set(["api", "url", "id"]);

/** An operation's title, a short sentence made from the method's name: `CreatePayment` is "Create payment". */
function titleOf(method: DescMethod): string {
  return sentence(method.name.replace(/([a-z0-9])([A-Z])/g, "$1 $2").split(" "));
}

/** Words as a title: the first capitalised, acronyms in capitals, the rest in lower case. */
function sentence(words: readonly string[]): string {
  const title = words.map((word) => (acronyms.has(word.toLowerCase()) ? word.toUpperCase() : word.toLowerCase())).join(" ");
  return title[0]!.toUpperCase() + title.slice(1);
}

/** A query parameter's value, as src/transport/rest/params.ts reads it (scalars, enum words, timestamps, lists of these). */
function queryValue(field: DescField, schemas: Schemas): Json {
  if (field.fieldKind === "list") return { type: "array", items: schemas.value(field, "request") };
  const value = schemas.value(field, "request") as JsonObject;
  const rules = schemas.rules.of(field);
  return rules === undefined ? value : { ...value, ...schemas.rules.schemaOf(rules) };
}

/** paymentservice.v1.FieldRules (options.proto) as the descriptors buf hands the plugin carry it. */
interface FieldRules {
  readonly required: boolean;
  readonly minimum?: bigint;
  readonly maximum?: bigint;
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly pattern?: string;
  readonly example?: string;
}

/** Reads the `(rules)` of request fields, and says them in JSON Schema: what the service checks, and a value it takes. */
class FieldRulesReader {
  constructor(private readonly option: DescExtension) {}

  /** The field's rules, undefined when it declares none. */
  of(field: DescField): FieldRules | undefined {
    const option = this.option as GenExtension;
    return hasOption(field, option) ? (getOption(field, option) as unknown as FieldRules) : undefined;
  }

  /** The schema keywords of `rules`, laid over the field's own schema (bounds replace the int64 range). */
  schemaOf(rules: FieldRules): JsonObject {
    const schema: JsonObject = {};
    if (rules.minimum !== undefined) schema.minimum = Number(rules.minimum);
    if (rules.maximum !== undefined) schema.maximum = Number(rules.maximum);
    if (rules.minLength !== undefined) schema.minLength = rules.minLength;
    if (rules.maxLength !== undefined) schema.maxLength = rules.maxLength;
    if (rules.pattern !== undefined) schema.pattern = rules.pattern;
    const example = rules.example === undefined ? null : (JSON.parse(rules.example) as Json);
    if (example !== null) schema.examples = [example];
    return schema;
  }

  /**
   * A request object made of the examples of `fields` and of the messages they hold, as a reader
   * would send it; undefined when none has an example.
   */
  exampleOf(fields: readonly DescField[]): JsonObject | undefined {
    const example: JsonObject = {};
    for (const field of fields) {
      const own = this.of(field)?.example;
      const value =
        own !== undefined
          ? (JSON.parse(own) as Json)
          : field.fieldKind === "message" && field.message.typeName !== "google.protobuf.Timestamp"
            ? this.exampleOf(field.message.fields)
            : undefined;
      // null: the field is left out of examples (options.proto).
      if (value === undefined || value === null) continue;
      example[field.name] = value;
    }
    return Object.keys(example).length === 0 ? undefined : example;
  }
}

/** The rate-limit headers of docs/rate-limits.md, on every response to an authenticated call and on every 429. */
function rateLimitHeaders(): JsonObject {
  const integer = (description: string): JsonObject => ({ description, schema: { type: "integer", minimum: 0 } });
  return {
    "X-RateLimit-Limit": integer(
      "Calls this API key may make per minute (admin API: calls of this client address; a 429 for failed authentications: failures this address may make).",
    ),
    "X-RateLimit-Remaining": integer("Calls left in the current minute, by the same count."),
    "X-RateLimit-Reset": integer("When the current minute ends, in Unix seconds."),
    "X-Request-Id": { description: "Names the request in the service's log (`req_…`).", schema: { type: "string" } },
    "Retry-After": integer("Seconds until the rate-limit window ends (at least 1)."),
  };
}

function headerRefs(...extra: string[]): JsonObject {
  const names = ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-Request-Id", ...extra];
  return Object.fromEntries(names.map((name) => [name, { $ref: `#/components/headers/${name}` }]));
}

/** The documented error answers (docs/api-conventions.md, Errors), all with the same body. */
function errorResponses(): JsonObject {
  const response = (description: string, ...extra: string[]): JsonObject => ({
    description,
    headers: headerRefs(...extra),
    content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
  });
  return {
    BadRequest: response(
      "IR_04 (a required field is missing), IR_05 (a field is malformed), IR_06 (the request is malformed: bad JSON, " +
        "an unknown field or query parameter, a bad `limit`), or a money or status rule (IR_13, IR_14, IR_16, …). " +
        "The message names the field.",
    ),
    // A call refused by authentication is counted against no key (docs/rate-limits.md): no rate-limit headers.
    Unauthorized: {
      ...response("IR_01: the `api-key` (or `admin-api-key`) is missing, unknown, revoked or expired."),
      headers: { "X-Request-Id": { $ref: "#/components/headers/X-Request-Id" } },
    },
    Forbidden: response("IR_22: the key may not perform this operation."),
    NotFound: response("HE_02: no such object for this merchant and environment (IR_02: no such path)."),
    Conflict: response("HE_01: a caller-chosen id is taken; IK_01: a request with this idempotency key is still running."),
    Unprocessable: response("IK_02: this idempotency key was used for a different request."),
    TooManyRequests: response(
      "RL_01: over a rate limit — this API key's calls, this client address's failed authentications, or its admin API calls " +
        "(docs/rate-limits.md); retry after `Retry-After` seconds.",
      "Retry-After",
    ),
    ServerError: response("HE_00: an unexpected failure; the message quotes the request id, and nothing else is said."),
    NotImplemented: response("IR_00: the operation is defined in the API but not built yet."),
    Unavailable: response(
      "SU_01: the service cannot reach its database right now (or is shutting down); nothing was changed. " +
        "Retry, with the same `X-Idempotency-Key` for a call that changes something.",
    ),
  };
}

function errorSchema(): JsonObject {
  return {
    description: "Every error answer: what went wrong, with a stable code (docs/api-conventions.md).",
    type: "object",
    required: ["error"],
    additionalProperties: false,
    properties: {
      error: {
        type: "object",
        required: ["type", "code", "message", "request_id"],
        additionalProperties: false,
        properties: {
          type: {
            type: "string",
            description: "The family: invalid_request, authentication_error, idempotency_error, rate_limit_error, api_error.",
          },
          code: { type: "string", pattern: "^[A-Z]{2}_[0-9]{2}$", description: "Stable machine-readable code, e.g. IR_04." },
          message: { type: "string", description: "Explanation naming the offending field where there is one." },
          request_id: {
            type: "string",
            description:
              "The request's id, as in its X-Request-Id header and the service's log line of the call: quote it when reporting an error.",
          },
        },
      },
    },
  };
}

/** A message's or field's leading comment, as written in the proto. */
function commentOf(desc: DescMessage | DescField | DescEnum | DescService | DescMethod | DescEnumValue): string | undefined {
  // protoc keeps the space after each `//`: dropped, so that Markdown does not read indentation.
  const text = getComments(desc)
    .leading?.split("\n")
    .map((line) => line.trim())
    .join("\n")
    .trim();
  return text === undefined || text === "" ? undefined : text;
}

function withDescription(object: JsonObject, desc: DescMessage | DescField | DescEnum | DescService | DescMethod): JsonObject {
  const description = commentOf(desc);
  return description === undefined ? object : { ...object, description };
}

function sortedKeys<T>(object: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(object).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/**
 * The component schemas, made as operations reference them. A message has two shapes: as a
 * response writes it (every key present, null when unset) and as a request may send it (every key
 * optional, null meaning absent, unknown keys refused); the request shape is named `<Name>Input`
 * when the message is also written in responses.
 */
class Schemas {
  private readonly built = new Map<string, Json>();
  private readonly owners = new Map<string, string>();

  constructor(readonly rules: FieldRulesReader) {}

  /** Every component schema made so far, by name. */
  all(): Record<string, Json> {
    return Object.fromEntries(this.built);
  }

  response(message: DescMessage): Json {
    return this.ref(message, message.name, () => this.object(message, "response", []));
  }

  request(message: DescMessage, omit: readonly DescField[] = []): Json {
    // A request message is never written in a response, so it keeps its own name; a body that omits the
    // path's fields is another shape, named after the method's input.
    return this.ref(message, omit.length === 0 ? this.requestName(message) : `${message.name}Body`, () =>
      this.object(message, "request", omit),
    );
  }

  /** The schema of one field's value (not null), or of one item of a list or map. */
  value(field: DescField, side: "request" | "response"): Json {
    if (field.fieldKind === "map") throw new Error(`${field.name}: a map has no single value`);
    const kind = field.fieldKind === "list" ? field.listKind : field.fieldKind;
    if (kind === "enum") return this.enumRef(field.enum!);
    if (kind === "message") {
      const message = field.message!;
      // Responses write RFC 3339 (toISOString); requests also take other ISO 8601 forms with a zone, e.g. without seconds.
      if (message.typeName === "google.protobuf.Timestamp")
        return side === "response" ? { type: "string", format: "date-time" } : { type: "string" };
      if (message.typeName === "google.protobuf.Struct") return { type: "object" };
      return side === "response" ? this.response(message) : this.request(message);
    }
    return scalarSchema(field.scalar!);
  }

  private requestName(message: DescMessage): string {
    return /Request$|Input$/.test(message.name) ? message.name : `${message.name}Input`;
  }

  private object(message: DescMessage, side: "request" | "response", omit: readonly DescField[]): Json {
    const properties: JsonObject = {};
    const fields = message.fields.filter((f) => !omit.includes(f));
    for (const field of fields) {
      properties[field.name] = withDescription(this.property(field, side), field) as Json;
    }
    const schema: JsonObject = { type: "object" };
    const description = commentOf(message);
    if (description !== undefined) schema.description = description;
    if (side === "response") schema.required = fields.map((f) => f.name);
    else {
      const required = fields.filter((f) => this.rules.of(f)?.required === true).map((f) => f.name);
      if (required.length > 0) schema.required = required;
    }
    schema.additionalProperties = false;
    schema.properties = properties;
    return schema;
  }

  /** A field as the codec writes it (response) or reads it (request: null is the same as absent). */
  private property(field: DescField, side: "request" | "response"): JsonObject {
    if (field.fieldKind === "list") return { type: "array", items: this.value(field, side) };
    if (field.fieldKind === "map") {
      const item =
        field.mapKind === "scalar"
          ? scalarSchema(field.scalar)
          : field.mapKind === "enum"
            ? this.enumRef(field.enum)
            : side === "response"
              ? this.response(field.message)
              : this.request(field.message);
      return { type: "object", additionalProperties: item };
    }
    const value = this.value(field, side) as JsonObject;
    const rules = side === "request" ? this.rules.of(field) : undefined;
    if (rules !== undefined) Object.assign(value, this.rules.schemaOf(rules));
    // A request's null is the field left out: fine unless the field is required.
    const nullable =
      (side === "request" && rules?.required !== true) ||
      (side === "response" &&
        (field.fieldKind === "enum" || field.fieldKind === "message" || field.presence !== FeatureSet_FieldPresence.IMPLICIT));
    if (!nullable) return value;
    if ("$ref" in value) return { oneOf: [value, { type: "null" }] };
    return { ...value, type: [value.type as string, "null"] };
  }

  private enumRef(desc: DescEnum): Json {
    return this.ref(desc, desc.name, () => {
      const words = desc.values.filter((v) => v.number !== 0);
      const notes = words.flatMap((v) => {
        const comment = commentOf(v)?.replaceAll("\n", " ");
        return comment === undefined ? [] : [`- \`${enumWord(desc, v.number)}\`: ${comment}`];
      });
      const description = [commentOf(desc), notes.join("\n")].filter((part) => part !== undefined && part !== "").join("\n\n");
      return {
        type: "string",
        ...(description === "" ? {} : { description }),
        enum: words.map((v) => enumWord(desc, v.number)),
      };
    });
  }

  private ref(desc: DescMessage | DescEnum, name: string, make: () => Json): Json {
    const owner = this.owners.get(name);
    if (owner !== undefined && owner !== desc.typeName) throw new Error(`two types are named ${name}: ${owner} and ${desc.typeName}`);
    if (owner === undefined) {
      this.owners.set(name, desc.typeName);
      // Set before making it, so that a message that contains itself refers to itself.
      this.built.set(name, null);
      this.built.set(name, make());
    }
    return { $ref: `#/components/schemas/${name}` };
  }
}

/** A scalar as the REST codec writes it: int64 as a JSON integer within the safe range, bytes as base64. */
function scalarSchema(scalar: ScalarType): JsonObject {
  switch (scalar) {
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return { type: "number" };
    case ScalarType.BYTES:
      return { type: "string", contentEncoding: "base64" };
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return { type: "integer", format: "int64", minimum: -maxSafe, maximum: maxSafe };
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return { type: "integer", format: "int64", minimum: 0, maximum: maxSafe };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { type: "integer", format: "int32", minimum: 0 };
    default:
      return { type: "integer", format: "int32" };
  }
}
