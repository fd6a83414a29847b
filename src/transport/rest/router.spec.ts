import { readdirSync, readFileSync } from "node:fs";
import { create, createFileRegistry, setExtension, type DescMethod, type MessageInitShape } from "@bufbuild/protobuf";
import { createMethodImplSpec, type MethodImplSpec } from "@connectrpc/connect";
import {
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  FileDescriptorProtoSchema,
  MethodDescriptorProtoSchema,
  MethodOptionsSchema,
} from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { file_google_api_annotations, http } from "../../../gen/google/api/annotations_pb.js";
import { HttpRuleSchema } from "../../../gen/google/api/http_pb.js";
import { ApiKeyService } from "../../../gen/paymentservice/v1/api_key_pb.js";
import { BalanceService } from "../../../gen/paymentservice/v1/balance_pb.js";
import { CustomerService } from "../../../gen/paymentservice/v1/customer_pb.js";
import { DisputeService } from "../../../gen/paymentservice/v1/dispute_pb.js";
import { EventService } from "../../../gen/paymentservice/v1/event_pb.js";
import { HealthService } from "../../../gen/paymentservice/v1/health_pb.js";
import { JobService } from "../../../gen/paymentservice/v1/job_pb.js";
import { MandateService } from "../../../gen/paymentservice/v1/mandate_pb.js";
import { MerchantService } from "../../../gen/paymentservice/v1/merchant_pb.js";
import { PaymentMethodService } from "../../../gen/paymentservice/v1/payment_method_pb.js";
import { PaymentService } from "../../../gen/paymentservice/v1/payment_pb.js";
import { PayoutService } from "../../../gen/paymentservice/v1/payout_pb.js";
import { RefundService } from "../../../gen/paymentservice/v1/refund_pb.js";
import { SandboxService } from "../../../gen/paymentservice/v1/sandbox_pb.js";
import { ApiRouter } from "../api-router.js";
import { MethodNotAllowedError } from "../../errors.js";
import { httpRulesOf, pathFieldsOf, RestRouter, type RouteMatch } from "./router.js";

/*
 * REST → RPC routing over the real protos, built as the port builds it: every service registered on
 * the ApiRouter (here with no implementation: routing does not need one), its methods handed to a
 * RestRouter. Table-driven as vanguard-go's router_test.go: method and path in, RPC and path
 * variables (or the error) out.
 */

const services = [
  HealthService,
  MerchantService,
  ApiKeyService,
  CustomerService,
  PaymentMethodService,
  MandateService,
  PaymentService,
  RefundService,
  PayoutService,
  DisputeService,
  BalanceService,
  EventService,
  SandboxService,
  JobService,
];
const api = new ApiRouter({});
for (const service of services) api.service(service, {});
const router = new RestRouter(api.methods);

/** The outcome of routing a request: the RPC and its raw path variables, or the error code. */
function route(
  httpMethod: string,
  path: string,
): { rpc: string; template: string; variables: string[] } | { code: string; allowed?: string[] } {
  let match: RouteMatch;
  try {
    match = router.match(httpMethod, path);
  } catch (error) {
    if (error instanceof MethodNotAllowedError) return { code: error.code, allowed: [...error.allowed].sort() };
    return { code: (error as { code: string }).code };
  }
  return {
    rpc: `${match.route.method.parent.name}.${match.route.method.name}`,
    template: match.route.template,
    variables: match.variables,
  };
}

/** Every REST route: HTTP method, template, a path of it, the RPC it calls, the path variables. */
const routes: [string, string, string, string, string[]][] = [
  ["GET", "/health", "/health", "HealthService.Check", []],
  ["POST", "/merchants", "/merchants", "MerchantService.CreateMerchant", []],
  ["GET", "/merchants/{merchant_id}", "/merchants/mer_1", "MerchantService.RetrieveMerchant", ["mer_1"]],
  ["POST", "/merchants/{merchant_id}/profiles", "/merchants/mer_1/profiles", "MerchantService.CreateProfile", ["mer_1"]],
  [
    "GET",
    "/merchants/{merchant_id}/profiles/{profile_id}",
    "/merchants/mer_1/profiles/pro_2",
    "MerchantService.RetrieveProfile",
    ["mer_1", "pro_2"],
  ],
  [
    "POST",
    "/merchants/{merchant_id}/profiles/{profile_id}",
    "/merchants/mer_1/profiles/pro_2",
    "MerchantService.UpdateProfile",
    ["mer_1", "pro_2"],
  ],
  ["POST", "/api-keys", "/api-keys", "ApiKeyService.CreateApiKey", []],
  ["GET", "/api-keys/{key_id}", "/api-keys/key_1", "ApiKeyService.RetrieveApiKey", ["key_1"]],
  ["GET", "/api-keys", "/api-keys", "ApiKeyService.ListApiKeys", []],
  ["DELETE", "/api-keys/{key_id}/revoke", "/api-keys/key_1/revoke", "ApiKeyService.RevokeApiKey", ["key_1"]],
  ["POST", "/customers", "/customers", "CustomerService.CreateCustomer", []],
  ["POST", "/customers/{customer_id}", "/customers/cus_1", "CustomerService.UpdateCustomer", ["cus_1"]],
  ["GET", "/customers/{customer_id}", "/customers/cus_1", "CustomerService.RetrieveCustomer", ["cus_1"]],
  ["GET", "/customers/list", "/customers/list", "CustomerService.ListCustomers", []],
  ["POST", "/customers/list", "/customers/list", "CustomerService.ListCustomers", []],
  ["DELETE", "/customers/{customer_id}", "/customers/cus_1", "CustomerService.DeleteCustomer", ["cus_1"]],
  ["POST", "/payment_methods", "/payment_methods", "PaymentMethodService.CreatePaymentMethod", []],
  ["GET", "/payment_methods/{payment_method_id}", "/payment_methods/pm_1", "PaymentMethodService.RetrievePaymentMethod", ["pm_1"]],
  ["POST", "/payment_methods/{payment_method_id}", "/payment_methods/pm_1", "PaymentMethodService.UpdatePaymentMethod", ["pm_1"]],
  [
    "POST",
    "/payment_methods/{payment_method_id}/attach",
    "/payment_methods/pm_1/attach",
    "PaymentMethodService.AttachPaymentMethod",
    ["pm_1"],
  ],
  ["DELETE", "/payment_methods/{payment_method_id}", "/payment_methods/pm_1", "PaymentMethodService.DeletePaymentMethod", ["pm_1"]],
  [
    "GET",
    "/customers/{customer_id}/payment_methods",
    "/customers/cus_1/payment_methods",
    "PaymentMethodService.ListCustomerPaymentMethods",
    ["cus_1"],
  ],
  [
    "POST",
    "/customers/{customer_id}/payment_methods",
    "/customers/cus_1/payment_methods",
    "PaymentMethodService.ListCustomerPaymentMethods",
    ["cus_1"],
  ],
  ["GET", "/mandates/{mandate_id}", "/mandates/man_1", "MandateService.RetrieveMandate", ["man_1"]],
  ["POST", "/mandates/{mandate_id}/revoke", "/mandates/man_1/revoke", "MandateService.RevokeMandate", ["man_1"]],
  ["GET", "/customers/{customer_id}/mandates", "/customers/cus_1/mandates", "MandateService.ListCustomerMandates", ["cus_1"]],
  ["POST", "/customers/{customer_id}/mandates", "/customers/cus_1/mandates", "MandateService.ListCustomerMandates", ["cus_1"]],
  ["POST", "/payments", "/payments", "PaymentService.CreatePayment", []],
  ["POST", "/payments/{payment_id}", "/payments/pay_1", "PaymentService.UpdatePayment", ["pay_1"]],
  ["GET", "/payments/{payment_id}", "/payments/pay_1", "PaymentService.RetrievePayment", ["pay_1"]],
  ["POST", "/payments/{payment_id}/confirm", "/payments/pay_1/confirm", "PaymentService.ConfirmPayment", ["pay_1"]],
  ["POST", "/payments/{payment_id}/capture", "/payments/pay_1/capture", "PaymentService.CapturePayment", ["pay_1"]],
  ["POST", "/payments/{payment_id}/cancel", "/payments/pay_1/cancel", "PaymentService.CancelPayment", ["pay_1"]],
  ["GET", "/payments/list", "/payments/list", "PaymentService.ListPayments", []],
  ["POST", "/payments/list", "/payments/list", "PaymentService.ListPayments", []],
  ["POST", "/refunds", "/refunds", "RefundService.CreateRefund", []],
  ["POST", "/refunds/{refund_id}", "/refunds/ref_1", "RefundService.UpdateRefund", ["ref_1"]],
  ["GET", "/refunds/{refund_id}", "/refunds/ref_1", "RefundService.RetrieveRefund", ["ref_1"]],
  ["POST", "/refunds/{refund_id}/cancel", "/refunds/ref_1/cancel", "RefundService.CancelRefund", ["ref_1"]],
  ["GET", "/refunds/list", "/refunds/list", "RefundService.ListRefunds", []],
  ["POST", "/refunds/list", "/refunds/list", "RefundService.ListRefunds", []],
  ["POST", "/payouts/create", "/payouts/create", "PayoutService.CreatePayout", []],
  ["POST", "/payouts/{payout_id}", "/payouts/po_1", "PayoutService.UpdatePayout", ["po_1"]],
  ["GET", "/payouts/{payout_id}", "/payouts/po_1", "PayoutService.RetrievePayout", ["po_1"]],
  ["POST", "/payouts/{payout_id}/fulfill", "/payouts/po_1/fulfill", "PayoutService.FulfillPayout", ["po_1"]],
  ["POST", "/payouts/{payout_id}/cancel", "/payouts/po_1/cancel", "PayoutService.CancelPayout", ["po_1"]],
  ["GET", "/payouts/list", "/payouts/list", "PayoutService.ListPayouts", []],
  ["POST", "/payouts/list", "/payouts/list", "PayoutService.ListPayouts", []],
  ["GET", "/disputes/{dispute_id}", "/disputes/dp_1", "DisputeService.RetrieveDispute", ["dp_1"]],
  ["GET", "/disputes/list", "/disputes/list", "DisputeService.ListDisputes", []],
  ["POST", "/disputes/list", "/disputes/list", "DisputeService.ListDisputes", []],
  ["POST", "/disputes/{dispute_id}/accept", "/disputes/dp_1/accept", "DisputeService.AcceptDispute", ["dp_1"]],
  ["POST", "/disputes/{dispute_id}/evidence", "/disputes/dp_1/evidence", "DisputeService.SubmitDisputeEvidence", ["dp_1"]],
  ["GET", "/balance", "/balance", "BalanceService.RetrieveBalance", []],
  [
    "GET",
    "/balance_transactions/{balance_transaction_id}",
    "/balance_transactions/txn_1",
    "BalanceService.RetrieveBalanceTransaction",
    ["txn_1"],
  ],
  ["GET", "/balance_transactions/list", "/balance_transactions/list", "BalanceService.ListBalanceTransactions", []],
  ["POST", "/balance_transactions/list", "/balance_transactions/list", "BalanceService.ListBalanceTransactions", []],
  ["GET", "/reports/balance", "/reports/balance", "BalanceService.RetrieveBalanceReport", []],
  ["GET", "/events/list", "/events/list", "EventService.ListEvents", []],
  ["POST", "/events/list", "/events/list", "EventService.ListEvents", []],
  ["GET", "/events/{event_id}", "/events/evt_1", "EventService.RetrieveEvent", ["evt_1"]],
  ["POST", "/events/{event_id}/redeliver", "/events/evt_1/redeliver", "EventService.RedeliverEvent", ["evt_1"]],
  ["POST", "/sandbox/clock/advance", "/sandbox/clock/advance", "SandboxService.AdvanceClock", []],
  ["POST", "/sandbox/payments/{payment_id}/dispute", "/sandbox/payments/pay_1/dispute", "SandboxService.OpenDispute", ["pay_1"]],
  ["POST", "/sandbox/disputes/{dispute_id}/resolve", "/sandbox/disputes/dp_1/resolve", "SandboxService.ResolveDispute", ["dp_1"]],
  ["GET", "/jobs/list", "/jobs/list", "JobService.ListJobs", []],
  ["POST", "/jobs/list", "/jobs/list", "JobService.ListJobs", []],
  ["POST", "/jobs/{job_id}/retry", "/jobs/42/retry", "JobService.RetryJob", ["42"]],
];

describe("RestRouter over the protos", () => {
  it.each(routes)("%s %s: %s is %s with variables %j", (httpMethod, template, path, rpc, variables) => {
    expect(route(httpMethod, path)).toEqual({ rpc, template, variables });
  });

  it("the table above holds every binding the protos declare, and no other", () => {
    const declared = api.methods.flatMap((spec) =>
      httpRulesOf(spec.method).map((rule) => `${rule.pattern.case?.toUpperCase()} ${String(rule.pattern.value)}`),
    );
    expect(declared.sort()).toEqual(routes.map(([httpMethod, template]) => `${httpMethod} ${template}`).sort());
  });

  const repository = new URL("../../../", import.meta.url);
  /** `METHOD /path` as the docs write an operation, with `:name` for an id. */
  const documented = [
    ...new Set(
      ["README.md", ...readdirSync(new URL("docs/", repository)).map((file) => `docs/${file}`)]
        .filter((file) => file.endsWith(".md"))
        .flatMap((file) => [
          ...readFileSync(new URL(file, repository), "utf8").matchAll(/\b(GET|POST|DELETE|PUT|PATCH) (\/[A-Za-z0-9_:/-]*)/g),
        ])
        .map(([, httpMethod, path]) => `${httpMethod} ${path}`)
        // docs/reliability.md quotes `GET //` as a request that once crashed the port, not as an operation.
        .filter((operation) => !operation.includes("//")),
    ),
  ];

  it("the docs name operations", () => {
    expect(documented.length).toBeGreaterThan(30);
  });

  it.each(documented)("the documented %s is routed to an RPC", (operation) => {
    const [httpMethod, path] = operation.split(" ") as [string, string];
    const outcome = route(httpMethod, path.replace(/:([a-z_]+)/g, "$1_x"));
    expect(outcome).toHaveProperty("rpc");
  });

  it.each([
    // A literal segment is not an id: these are never RetrieveX("list") or UpdatePayout("create").
    ["GET", "/payments/list", "PaymentService.ListPayments"],
    ["POST", "/customers/list", "CustomerService.ListCustomers"],
    ["POST", "/payouts/create", "PayoutService.CreatePayout"],
    ["GET", "/events/list", "EventService.ListEvents"],
    // …but one position on, the same word can be an id.
    ["GET", "/payments/list/confirm", undefined],
    ["POST", "/payments/list/confirm", "PaymentService.ConfirmPayment"],
  ])("%s %s goes to %s", (httpMethod, path, rpc) => {
    const outcome = route(httpMethod, path);
    if (rpc === undefined) expect(outcome).toHaveProperty("code");
    else expect(outcome).toHaveProperty("rpc", rpc);
  });

  it.each([
    ["an id with an encoded slash", "/customers/cus%2F1", ["cus%2F1"]],
    ["an id with encoded UTF-8", "/customers/caf%C3%A9", ["caf%C3%A9"]],
    ["an id with a plus", "/customers/a+b", ["a+b"]],
    ["an id with broken percent-encoding", "/customers/%E0%A4%A", ["%E0%A4%A"]],
  ])("%s is matched raw, its decoding left to the request (%s)", (_, path, variables) => {
    expect(route("GET", path)).toMatchObject({ rpc: "CustomerService.RetrieveCustomer", variables });
  });

  it.each([
    ["PUT", "/payments", ["POST"]],
    ["GET", "/payments", ["POST"]],
    ["DELETE", "/payments/pay_1", ["GET", "POST"]],
    ["PATCH", "/customers/cus_1", ["DELETE", "GET", "POST"]],
    ["GET", "/payments/pay_1/capture", ["POST"]],
    ["GET", "/api-keys/key_1/revoke", ["DELETE"]],
    ["DELETE", "/api-keys", ["GET", "POST"]],
    ["POST", "/health", ["GET"]],
    ["HEAD", "/health", ["GET"]],
    ["OPTIONS", "/payments/list", ["GET", "POST"]],
    ["DELETE", "/merchants/mer_1/profiles", ["POST"]],
    // A literal template owns its path whatever the method: these are not ids for the variable routes.
    ["DELETE", "/customers/list", ["GET", "POST"]],
    ["GET", "/payouts/create", ["POST"]],
    // Node hands over the method as sent; the bindings are upper-case, as HTTP methods are.
    ["get", "/health", ["GET"]],
  ])("%s %s is a known path for other methods: 405 IR_03, allowed %j", (httpMethod, path, allowed) => {
    expect(route(httpMethod, path)).toEqual({ code: "IR_03", allowed });
  });

  it.each([
    ["GET", "/"],
    ["GET", ""],
    ["GET", "/nothing-here"],
    ["GET", "/payments/"],
    ["GET", "/payments/pay_1/"],
    ["POST", "/payments//confirm"],
    ["POST", "/payments/pay_1/refund"],
    ["POST", "/payments/pay_1/confirm/again"],
    ["GET", "/Payments/pay_1"],
    ["GET", "//health"],
    ["GET", "/health/"],
    ["GET", "/v1/payments/pay_1"],
    ["GET", "/paymentservice.v1.HealthService/Check"],
  ])("%s %s is no path of the API: 404 IR_02", (httpMethod, path) => {
    expect(route(httpMethod, path)).toEqual({ code: "IR_02" });
  });

  it.each([
    ["RetrievePayment", PaymentService.method.retrievePayment, ["payment_id"]],
    ["CreatePayment", PaymentService.method.createPayment, []],
    ["RetrieveProfile", MerchantService.method.retrieveProfile, ["merchant_id", "profile_id"]],
    ["RevokeApiKey", ApiKeyService.method.revokeApiKey, ["key_id"]],
    ["ListCustomers (two bindings)", CustomerService.method.listCustomers, []],
    ["OpenDispute", SandboxService.method.openDispute, ["payment_id"]],
  ] as const)("pathFieldsOf %s is %j: the ids its paths bind", (_, method, fields) => {
    expect(pathFieldsOf(method).map((f) => f.name)).toEqual(fields);
  });
});

/** Methods M0, M1, … of a made-up service, bound by `rules`; `streaming` makes them server-streaming. */
function methodsBoundTo(rules: MessageInitShape<typeof HttpRuleSchema>[], streaming = false): DescMethod[] {
  const file = create(FileDescriptorProtoSchema, {
    name: "spec/bindings.proto",
    package: "spec",
    syntax: "proto3",
    dependency: ["google/api/annotations.proto"],
    messageType: [
      {
        name: "Req",
        field: [{ name: "id", number: 1, type: FieldDescriptorProto_Type.STRING, label: FieldDescriptorProto_Label.OPTIONAL }],
      },
    ],
    service: [
      {
        name: "Bindings",
        method: rules.map((rule, i) => {
          const options = create(MethodOptionsSchema);
          setExtension(options, http, create(HttpRuleSchema, rule));
          return create(MethodDescriptorProtoSchema, {
            name: `M${i}`,
            inputType: ".spec.Req",
            outputType: ".spec.Req",
            options,
            serverStreaming: streaming,
          });
        }),
      },
    ],
  });
  const registry = createFileRegistry(file, (name) => (name === "google/api/annotations.proto" ? file_google_api_annotations : undefined));
  return registry.getService("spec.Bindings")!.methods;
}

/** What building a router of `rules` throws, or undefined when it builds. */
function startUpError(rules: MessageInitShape<typeof HttpRuleSchema>[], streaming = false): string | undefined {
  const specs = methodsBoundTo(rules, streaming).map((method) => createMethodImplSpec(method, (() => ({})) as never) as MethodImplSpec);
  try {
    new RestRouter(specs);
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

describe("RestRouter refuses at start-up a binding it could not serve", () => {
  it.each([
    [
      "a body naming one field",
      [{ pattern: { case: "post", value: "/a" }, body: "id" }],
      false,
      'only body "*" or no body is supported, got "id"',
    ],
    ["a response_body", [{ pattern: { case: "get", value: "/a" }, responseBody: "id" }], false, "response_body is not supported"],
    [
      "a custom HTTP method",
      [{ pattern: { case: "custom", value: { kind: "SEARCH", path: "/a" } } }],
      false,
      "unsupported http rule pattern custom",
    ],
    [
      "a streaming method",
      [{ pattern: { case: "get", value: "/a" } }],
      true,
      "only unary methods can have REST bindings, not server_streaming",
    ],
    [
      "two RPCs on one method and path",
      [{ pattern: { case: "get", value: "/a/{id}" } }, { pattern: { case: "get", value: "/a/{id=*}" } }],
      false,
      "two RPCs are bound to GET /a/{id=*}",
    ],
    [
      "an additional binding that is unsupported",
      [{ pattern: { case: "get", value: "/a" }, additionalBindings: [{ pattern: { case: "get", value: "/a/{id=**}" } }] }],
      false,
      "unsupported segment",
    ],
  ] as const)("%s", (_, rules, streaming, says) => {
    expect(startUpError(rules as unknown as MessageInitShape<typeof HttpRuleSchema>[], streaming)).toContain(says);
  });

  it.each([
    [
      "one method on two paths",
      [{ pattern: { case: "get", value: "/a" }, additionalBindings: [{ pattern: { case: "post", value: "/a" }, body: "*" }] }],
    ],
    [
      "two methods on one path",
      [{ pattern: { case: "get", value: "/a/{id}" } }, { pattern: { case: "post", value: "/a/{id}" }, body: "*" }],
    ],
    ["a method without a binding", [{}]],
  ] as const)("but builds %s", (_, rules) => {
    expect(startUpError(rules as unknown as MessageInitShape<typeof HttpRuleSchema>[])).toBeUndefined();
  });
});
