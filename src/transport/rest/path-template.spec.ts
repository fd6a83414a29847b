import {
  create,
  createFileRegistry,
  setExtension,
  type DescMessage,
  type DescMethod,
  type DescService,
  type MessageInitShape,
} from "@bufbuild/protobuf";
import { createMethodImplSpec, type MethodImplSpec } from "@connectrpc/connect";
import {
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  FileDescriptorProtoSchema,
  MethodOptionsSchema,
} from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { file_google_api_annotations, http } from "../../../gen/google/api/annotations_pb.js";
import { HttpRuleSchema } from "../../../gen/google/api/http_pb.js";
import { RetrieveProfileRequestSchema } from "../../../gen/paymentservice/v1/merchant_pb.js";
import {
  CreatePaymentRequestSchema,
  ListPaymentsRequestSchema,
  RetrievePaymentRequestSchema,
} from "../../../gen/paymentservice/v1/payment_pb.js";
import { ApiError, MethodNotAllowedError } from "../../errors.js";
import { parsePathTemplate, type PathSegment } from "./path-template.js";
import { RestRouter } from "./router.js";

/*
 * The path templates of google.api.http rules, in the subset our protos use: literal segments and
 * single-segment variables (`{id}`, or `{id=*}`) naming a top-level string field. Anything else is
 * refused when the router is built, never routed wrongly. Matching is the router's; it is tested
 * here on made-up templates, built into a service as protoc would from a .proto.
 */

/** A parsed template as text: literals as they are, variables as `{field}`. */
function shape(segments: PathSegment[]): string[] {
  return segments.map((s) => ("literal" in s ? s.literal : `{${s.variable.name}}`));
}

/** What parsing `template` against `input` throws, or undefined when it parses. */
function parseError(template: string, input: DescMessage): string | undefined {
  try {
    parsePathTemplate(template, input);
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

describe("parsePathTemplate", () => {
  it.each([
    ["/health", RetrievePaymentRequestSchema, ["health"]],
    ["/payments/{payment_id}", RetrievePaymentRequestSchema, ["payments", "{payment_id}"]],
    ["/payments/{payment_id=*}", RetrievePaymentRequestSchema, ["payments", "{payment_id}"]],
    ["/payments/{payment_id}/confirm", RetrievePaymentRequestSchema, ["payments", "{payment_id}", "confirm"]],
    [
      "/merchants/{merchant_id}/profiles/{profile_id}",
      RetrieveProfileRequestSchema,
      ["merchants", "{merchant_id}", "profiles", "{profile_id}"],
    ],
    ["/v1.2/a-b_c~d", RetrievePaymentRequestSchema, ["v1.2", "a-b_c~d"]],
    // An optional string field may be bound too: presence does not change what the path carries.
    ["/payments/{client_secret}", RetrievePaymentRequestSchema, ["payments", "{client_secret}"]],
  ] as const)("%s parses into %j", (template, input, segments) => {
    expect(shape(parsePathTemplate(template, input))).toEqual(segments);
  });

  it("binds each variable to the request field it names", () => {
    const [, merchant, , profile] = parsePathTemplate("/merchants/{merchant_id}/profiles/{profile_id}", RetrieveProfileRequestSchema);
    expect([merchant, profile]).toEqual([
      { variable: RetrieveProfileRequestSchema.field.merchantId },
      { variable: RetrieveProfileRequestSchema.field.profileId },
    ]);
  });

  it.each([
    ["a path without its leading slash", "payments/{payment_id}", RetrievePaymentRequestSchema, 'must start with "/"'],
    ["the root alone", "/", RetrievePaymentRequestSchema, 'unsupported segment ""'],
    ["a trailing slash", "/payments/", RetrievePaymentRequestSchema, 'unsupported segment ""'],
    ["an empty segment", "/payments//confirm", RetrievePaymentRequestSchema, 'unsupported segment ""'],
    ["a multi-segment variable {x=**}", "/payments/{payment_id=**}", RetrievePaymentRequestSchema, "unsupported segment"],
    ["a variable with a sub-template", "/payments/{payment_id=pay/*}", RetrievePaymentRequestSchema, "unsupported segment"],
    ["an anonymous wildcard *", "/payments/*", RetrievePaymentRequestSchema, 'unsupported segment "*"'],
    ["an anonymous wildcard **", "/payments/**", RetrievePaymentRequestSchema, 'unsupported segment "**"'],
    ["a custom verb", "/payments/{payment_id}:confirm", RetrievePaymentRequestSchema, "unsupported segment"],
    ["a literal verb", "/payments:search", RetrievePaymentRequestSchema, "unsupported segment"],
    ["a nested field path", "/payments/{payment_method_data.card}", CreatePaymentRequestSchema, "unsupported segment"],
    ["an upper-case field name", "/payments/{Payment_id}", RetrievePaymentRequestSchema, "unsupported segment"],
    ["a percent-encoded literal", "/pay%20ments", RetrievePaymentRequestSchema, "unsupported segment"],
    [
      "a field the request lacks",
      "/payments/{customer_id}",
      RetrievePaymentRequestSchema,
      "is not a string field of paymentservice.v1.RetrievePaymentRequest",
    ],
    ["an integer field", "/payments/{limit}", ListPaymentsRequestSchema, "path variable limit of /payments/{limit} is not a string field"],
    ["an enum field", "/payments/{status}", ListPaymentsRequestSchema, "path variable status"],
    ["a message field", "/payments/{created_gte}", ListPaymentsRequestSchema, "path variable created_gte"],
    ["a map field", "/payments/{metadata}", CreatePaymentRequestSchema, "path variable metadata"],
  ] as const)("refuses %s at start-up", (_, template, input, says) => {
    expect(parseError(template, input)).toContain(says);
  });
});

/** A proto3 service whose methods M0, M1, … are bound by `rules`, on a request with string fields `id` and `other_id`. */
function serviceBoundTo(rules: MessageInitShape<typeof HttpRuleSchema>[]): DescService {
  const stringField = (name: string, number: number) => ({
    name,
    number,
    type: FieldDescriptorProto_Type.STRING,
    label: FieldDescriptorProto_Label.OPTIONAL,
  });
  const file = create(FileDescriptorProtoSchema, {
    name: "spec/routes.proto",
    package: "spec",
    syntax: "proto3",
    dependency: ["google/api/annotations.proto"],
    messageType: [{ name: "Req", field: [stringField("id", 1), stringField("other_id", 2)] }],
    service: [
      {
        name: "Routes",
        method: rules.map((rule, i) => {
          const options = create(MethodOptionsSchema);
          setExtension(options, http, create(HttpRuleSchema, rule));
          return { name: `M${i}`, inputType: ".spec.Req", outputType: ".spec.Req", options };
        }),
      },
    ],
  });
  const registry = createFileRegistry(file, (name) => (name === "google/api/annotations.proto" ? file_google_api_annotations : undefined));
  return registry.getService("spec.Routes")!;
}

/** The router of the service bound by `rules`, each method answering an empty message. */
function routerOf(rules: MessageInitShape<typeof HttpRuleSchema>[]): RestRouter {
  const specs = serviceBoundTo(rules).methods.map(
    (method: DescMethod) => createMethodImplSpec(method, (() => ({})) as never) as MethodImplSpec,
  );
  return new RestRouter(specs);
}

describe("matching paths against templates", () => {
  const router = routerOf([
    { pattern: { case: "get", value: "/things" } },
    { pattern: { case: "get", value: "/things/{id}" } },
    { pattern: { case: "get", value: "/things/special" } },
    { pattern: { case: "get", value: "/things/{id}/parts/{other_id}" } },
    { pattern: { case: "get", value: "/things/{id=*}/edit" } },
    { pattern: { case: "get", value: "/v1.2/a-b_c~d" } },
    { pattern: { case: "get", value: "/x/{id}/z" } },
    { pattern: { case: "get", value: "/x/y/{other_id}" } },
  ]);

  it.each([
    ["/things", "M0", []],
    ["/things/t1", "M1", ["t1"]],
    ["/things/special", "M2", []],
    ["/things/t1/parts/p2", "M3", ["t1", "p2"]],
    ["/things/t1/edit", "M4", ["t1"]],
    ["/v1.2/a-b_c~d", "M5", []],
    // The values stay percent-encoded: decoding is the request's (params.ts), after matching, so an
    // encoded "/" never splits a segment.
    ["/things/a%2Fb", "M1", ["a%2Fb"]],
    ["/things/caf%C3%A9", "M1", ["caf%C3%A9"]],
    ["/things/a%2Fb/parts/%3F", "M3", ["a%2Fb", "%3F"]],
    ["/things/a+b", "M1", ["a+b"]],
    // A literal beats a variable position by position, the earlier position first.
    ["/x/y/z", "M7", ["z"]],
    ["/x/w/z", "M6", ["w"]],
  ])("GET %s is %s with variables %j", (path, method, variables) => {
    const match = router.match("GET", path);
    expect({ method: match.route.method.name, variables: match.variables }).toEqual({ method, variables });
  });

  it.each([
    ["an empty variable", "/things/"],
    ["an empty variable mid-path", "/things//parts/p2"],
    ["a trailing slash", "/things/t1/"],
    ["a missing trailing segment", "/things/t1/parts"],
    ["an extra trailing segment", "/things/t1/parts/p2/extra"],
    ["a segment of another case", "/Things"],
    ["a literal prefix only", "/thing"],
    ["an encoded slash between literals", "/things%2Fspecial"],
    ["a doubled leading slash", "//things"],
    ["the root", "/"],
    ["no path at all", ""],
  ])("%s (%s) matches nothing: IR_02", (_, path) => {
    expect(() => router.match("GET", path)).toThrow(
      expect.objectContaining({ code: "IR_02", message: `Unrecognized request URL: GET ${path}` }),
    );
  });

  it("a path that only another HTTP method has is IR_03, naming the methods it has", () => {
    let thrown: unknown;
    try {
      router.match("DELETE", "/things/t1");
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(MethodNotAllowedError);
    expect(thrown).toBeInstanceOf(ApiError);
    expect(thrown).toMatchObject({ code: "IR_03", allowed: ["GET"], message: "Method DELETE is not allowed on /things/t1; allowed: GET" });
  });
});
