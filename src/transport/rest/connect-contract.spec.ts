import { create, isMessage } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextKey,
  createContextValues,
  createMethodImplSpec,
  createServiceImplSpec,
  type HandlerContext,
  type Interceptor,
  type MethodImplSpec,
} from "@connectrpc/connect";
import { invokeUnaryImplementation } from "@connectrpc/connect/protocol";
import { describe, expect, it } from "vitest";
import { CheckResponseSchema, HealthService } from "../../../gen/paymentservice/v1/health_pb.js";
import { PaymentSchema, PaymentService, RetrievePaymentRequestSchema, type Payment } from "../../../gen/paymentservice/v1/payment_pb.js";
import { ApiError } from "../../errors.js";
import { toConnectError } from "../errors.js";
import type { UnaryMethodSpec } from "./router.js";

/*
 * A contract with connect-es. The REST transcoder (handler.ts) calls `invokeUnaryImplementation`
 * from "@connectrpc/connect/protocol", which connect-es marks "@private Internal code, does not
 * follow semantic versioning", with a HandlerContext it builds itself; and ApiRouter keeps the
 * MethodImplSpecs that `createServiceImplSpec` / `createMethodImplSpec` make. These cases pin
 * exactly what the service relies on, so a connect-es upgrade that changes any of it fails here,
 * loudly, instead of REST calls silently skipping an interceptor, losing a header or a context value.
 */

const retrievePayment = PaymentService.method.retrievePayment;

/** A HandlerContext built field by field as handler.ts builds it (so a new required field fails to type-check here too). */
function restContext(
  init: { requestHeader?: Record<string, string>; values?: ReturnType<typeof createContextValues>; signal?: AbortSignal } = {},
): HandlerContext {
  return {
    service: retrievePayment.parent,
    method: retrievePayment,
    protocolName: "rest",
    requestMethod: "GET",
    url: "/payments/pay_1?client_secret=s",
    signal: init.signal ?? new AbortController().signal,
    timeoutMs: () => undefined,
    requestHeader: new Headers(init.requestHeader),
    responseHeader: new Headers(),
    responseTrailer: new Headers(),
    values: init.values ?? createContextValues(),
  };
}

/** The unary spec of RetrievePayment with `impl`, as ApiRouter keeps it. */
function retrieveSpec(impl: (req: { paymentId: string }, ctx: HandlerContext) => unknown): UnaryMethodSpec {
  return createMethodImplSpec(retrievePayment, impl as never) as UnaryMethodSpec;
}

const request = () => create(RetrievePaymentRequestSchema, { paymentId: "pay_1" });

describe("invokeUnaryImplementation, as handler.ts calls it", () => {
  it("takes (spec, context, input message, interceptors) and resolves to the output message", async () => {
    expect(invokeUnaryImplementation).toHaveLength(4);
    const output = await invokeUnaryImplementation(
      retrieveSpec((req) => ({ paymentId: req.paymentId, amount: 5n })),
      restContext(),
      request(),
      [],
    );
    // A plain object the implementation returns comes back a full message, as writeMessage needs.
    expect(isMessage(output, PaymentSchema)).toBe(true);
    expect(output).toEqual(create(PaymentSchema, { paymentId: "pay_1", amount: 5n }));
  });

  it("runs the interceptors in array order, the first outermost, around the implementation", async () => {
    const log: string[] = [];
    const named =
      (name: string): Interceptor =>
      (next) =>
      async (req) => {
        log.push(`${name} in`);
        const res = await next(req);
        log.push(`${name} out`);
        return res;
      };
    await invokeUnaryImplementation(
      retrieveSpec(() => {
        log.push("implementation");
        return {};
      }),
      restContext(),
      request(),
      [named("outcome"), named("deadline"), named("rules")],
    );
    expect(log).toEqual(["outcome in", "deadline in", "rules in", "implementation", "rules out", "deadline out", "outcome out"]);
  });

  it("hands interceptors a unary request made of the input and the context", async () => {
    const values = createContextValues();
    const signal = new AbortController().signal;
    const context = restContext({ requestHeader: { "api-key": "snd_x", "idempotency-key": "k1" }, values, signal });
    const input = request();
    let seen: unknown;
    const spy: Interceptor = (next) => (req) => {
      seen = {
        stream: req.stream,
        message: req.message,
        method: req.method,
        service: req.service,
        requestMethod: req.requestMethod,
        url: req.url,
        signal: req.signal,
        apiKey: req.header.get("api-key"),
        idempotencyKey: req.header.get("idempotency-key"),
        contextValues: req.contextValues,
      };
      return next(req);
    };
    await invokeUnaryImplementation(
      retrieveSpec(() => ({})),
      context,
      input,
      [spy],
    );
    expect(seen).toEqual({
      stream: false,
      message: input,
      method: retrievePayment,
      service: PaymentService,
      requestMethod: "GET",
      url: "/payments/pay_1?client_secret=s",
      signal,
      apiKey: "snd_x",
      idempotencyKey: "k1",
      contextValues: values,
    });
    expect((seen as { message: unknown }).message).toBe(input);
    expect((seen as { contextValues: unknown }).contextValues).toBe(values);
  });

  it("gives the implementation the message and the context, protocol name, headers and values included", async () => {
    const values = createContextValues();
    const context = restContext({ requestHeader: { "api-key": "snd_x" }, values });
    let seen: unknown;
    const input = request();
    await invokeUnaryImplementation(
      retrieveSpec((req, ctx) => {
        seen = {
          req,
          protocolName: ctx.protocolName,
          requestMethod: ctx.requestMethod,
          url: ctx.url,
          method: ctx.method,
          service: ctx.service,
          timeoutMs: ctx.timeoutMs(),
          apiKey: ctx.requestHeader.get("api-key"),
          values: ctx.values,
          signal: ctx.signal,
        };
        return {};
      }),
      context,
      input,
      [],
    );
    expect(seen).toEqual({
      req: input,
      protocolName: "rest",
      requestMethod: "GET",
      url: "/payments/pay_1?client_secret=s",
      method: retrievePayment,
      service: PaymentService,
      timeoutMs: undefined,
      apiKey: "snd_x",
      values,
      signal: context.signal,
    });
    expect((seen as { values: unknown }).values).toBe(values);
  });

  it("lets a context value an interceptor sets reach the implementation (the idempotency replay relies on it)", async () => {
    const replayKey = createContextKey<string | undefined>(undefined);
    const setter: Interceptor = (next) => (req) => {
      req.contextValues.set(replayKey, "stored response");
      return next(req);
    };
    let seen: string | undefined;
    await invokeUnaryImplementation(
      retrieveSpec((_, ctx) => {
        seen = ctx.values.get(replayKey);
        return {};
      }),
      restContext(),
      request(),
      [setter],
    );
    expect(seen).toBe("stored response");
  });

  it("leaves in the context's responseHeader what the implementation and the interceptors set", async () => {
    const marker: Interceptor = (next) => async (req) => {
      const res = await next(req);
      expect(res.stream).toBe(false);
      res.header.set("idempotent-replayed", "true");
      return res;
    };
    const context = restContext();
    await invokeUnaryImplementation(
      retrieveSpec((_, ctx) => {
        ctx.responseHeader.set("x-from-implementation", "1");
        return {};
      }),
      context,
      request(),
      [marker],
    );
    expect(Object.fromEntries(context.responseHeader)).toEqual({ "x-from-implementation": "1", "idempotent-replayed": "true" });
  });

  it("shows interceptors the response as a full message of the output type (the idempotency store serializes it)", async () => {
    let message: unknown;
    const spy: Interceptor = (next) => async (req) => {
      const res = await next(req);
      if (!res.stream) message = res.message;
      return res;
    };
    await invokeUnaryImplementation(
      retrieveSpec(() => ({ paymentId: "pay_1" })),
      restContext(),
      request(),
      [spy],
    );
    expect(isMessage(message, PaymentSchema)).toBe(true);
  });

  it("lets an interceptor answer without running the implementation", async () => {
    let ran = false;
    const answer: Interceptor = () => async (req) =>
      ({
        stream: false,
        message: create(PaymentSchema, { paymentId: "pay_stored" }),
        method: req.method,
        service: req.service,
        header: new Headers({ "x-stored": "1" }),
        trailer: new Headers(),
      }) as never;
    const context = restContext();
    const output = await invokeUnaryImplementation(
      retrieveSpec(() => {
        ran = true;
        return {};
      }),
      context,
      request(),
      [answer],
    );
    expect({ ran, paymentId: (output as Payment).paymentId, header: context.responseHeader.get("x-stored") }).toEqual({
      ran: false,
      paymentId: "pay_stored",
      header: "1",
    });
  });

  it.each([
    ["the implementation", "implementation"],
    ["an interceptor", "interceptor"],
  ] as const)("rejects with exactly what %s threw: an ApiError stays an ApiError for the REST error answer", async (_, where) => {
    const thrown = new ApiError("HE_02", "Payment not found: pay_1");
    const thrower: Interceptor = (next) => (req) => {
      if (where === "interceptor") throw thrown;
      return next(req);
    };
    const rejection = await invokeUnaryImplementation(
      retrieveSpec(() => {
        throw thrown;
      }),
      restContext(),
      request(),
      [thrower],
    ).catch((reason: unknown) => reason);
    expect(rejection).toBe(thrown);
  });

  it("rejects with a non-ApiError unchanged too, so its cause reaches the log", async () => {
    const thrown = new TypeError("x is undefined");
    const rejection = await invokeUnaryImplementation(
      retrieveSpec(() => Promise.reject(thrown)),
      restContext(),
      request(),
      [],
    ).catch((reason: unknown) => reason);
    expect(rejection).toBe(thrown);
  });
});

describe("createServiceImplSpec and createMethodImplSpec, as ApiRouter uses them", () => {
  it("makes one spec per method of the service, keyed by local name, of the method's kind", () => {
    const spec = createServiceImplSpec(PaymentService, {});
    expect(spec.service).toBe(PaymentService);
    expect(Object.keys(spec.methods)).toEqual(PaymentService.methods.map((m) => m.localName));
    for (const method of PaymentService.methods) {
      expect(spec.methods[method.localName]).toMatchObject({ kind: "unary", method });
    }
  });

  it("keeps an implemented method's behaviour, bound to the implementation object", async () => {
    const implementation = {
      prefix: "bound:",
      check(this: { prefix: string }) {
        return { status: `${this.prefix}ok` };
      },
    };
    const spec = createServiceImplSpec(HealthService, implementation as never).methods.check as UnaryMethodSpec;
    const output = await invokeUnaryImplementation(
      spec,
      { ...restContext(), method: HealthService.method.check, service: HealthService },
      create(HealthService.method.check.input),
      [],
    );
    expect(output).toEqual(create(CheckResponseSchema, { status: "bound:ok" }));
  });

  it("looks each method up by its local name on the implementation, so a Proxy (replayable) is consulted", () => {
    const asked: PropertyKey[] = [];
    const implementation = new Proxy(
      {},
      {
        get: (_, property) => {
          asked.push(property);
          return undefined;
        },
      },
    );
    createServiceImplSpec(HealthService, implementation);
    expect(asked).toContain("check");
  });

  it("answers a method left out of the implementation unimplemented, which the service documents as IR_00", async () => {
    const spec = createServiceImplSpec(PaymentService, {}).methods.retrievePayment as UnaryMethodSpec;
    const rejection = await invokeUnaryImplementation(spec, restContext(), request(), []).catch((reason: unknown) => reason);
    expect(rejection).toBeInstanceOf(ConnectError);
    expect(rejection).toMatchObject({
      code: Code.Unimplemented,
      rawMessage: "paymentservice.v1.PaymentService.RetrievePayment is not implemented",
    });
    expect(toConnectError(rejection).rawMessage).toBe(
      "paymentservice.v1.PaymentService.RetrievePayment is not implemented: this operation is not available yet",
    );
  });

  it("createMethodImplSpec wraps one method: its kind, the method, the very implementation", () => {
    const impl = () => ({});
    const spec: MethodImplSpec = createMethodImplSpec(retrievePayment, impl);
    expect(spec).toEqual({ kind: "unary", method: retrievePayment, impl });
    expect(spec.impl).toBe(impl);
  });
});
