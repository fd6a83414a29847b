import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError, createClient, createRouterTransport, type Interceptor, type ServiceImpl } from "@connectrpc/connect";
import { afterEach, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/paymentservice/v1/error_pb.js";
import { PaymentService, PaymentStatus } from "../../gen/paymentservice/v1/payment_pb.js";
import { ApiError } from "../errors.js";
import { deadlineInterceptor } from "./deadline-interceptor.js";
import { documentedError } from "./errors.js";
import { outcomeInterceptor } from "./outcome-interceptor.js";
import { RequestRecord, requestRecordKey } from "./request-record.js";
import { createRequestRulesInterceptor } from "./request-rules.js";

/*
 * The interceptors every call goes through, in process as connect-es tests its own: a router
 * transport and a client, no port, no database, a fake PaymentService whose handlers return or throw.
 * Each case asserts what a Connect client observes: the code, the ErrorDetail, the headers. The app
 * (src/app.ts `serve`) runs them in this order, before idempotency: outcome, deadline, request rules.
 */

/** Stands in for the port, which starts every call's context values with the request's record. */
function withRecord(record: RequestRecord): Interceptor {
  return (next) => (req) => {
    req.contextValues.set(requestRecordKey, record);
    return next(req);
  };
}

/** The interceptors as the app orders them (idempotency, which needs a database, left out). */
const appInterceptors = (record: RequestRecord): Interceptor[] => [
  withRecord(record),
  outcomeInterceptor,
  deadlineInterceptor,
  createRequestRulesInterceptor(),
];

/** A PaymentService client served in process by `impl` through `interceptors`. */
function clientOf(impl: Partial<ServiceImpl<typeof PaymentService>>, interceptors: Interceptor[]) {
  const transport = createRouterTransport((router) => router.service(PaymentService, impl), { router: { interceptors } });
  return createClient(PaymentService, transport);
}

/** What a client observes of a failed call: the Connect code and the ErrorDetail (undefined when there is none). */
async function failure(
  call: Promise<unknown>,
): Promise<{ code: Code; detail: { type: string; code: string; message: string } | undefined }> {
  const reason = await call.then(
    () => {
      throw new Error("the call succeeded");
    },
    (error: unknown) => error,
  );
  expect(reason).toBeInstanceOf(ConnectError);
  const error = reason as ConnectError;
  const detail = error.findDetails(ErrorDetailSchema)[0];
  return { code: error.code, detail: detail === undefined ? undefined : { type: detail.type, code: detail.code, message: detail.message } };
}

/** Work still running when a test ends must not leak into the next one. */
const pending: Promise<unknown>[] = [];
afterEach(async () => {
  await Promise.allSettled(pending.splice(0));
});

describe("outcomeInterceptor", () => {
  it("passes an answer through untouched", async () => {
    const record = new RequestRecord();
    const client = clientOf({ retrievePayment: (req) => ({ paymentId: req.paymentId, amount: 500n }) }, appInterceptors(record));
    expect(await client.retrievePayment({ paymentId: "pay_1" })).toMatchObject({ paymentId: "pay_1", amount: 500n });
    expect(record.code).toBeUndefined();
  });

  it.each([
    ["HE_02", Code.NotFound, "invalid_request", "Payment not found: pay_1"],
    ["IR_16", Code.FailedPrecondition, "invalid_request", "This payment cannot be cancelled from status succeeded"],
    ["IR_22", Code.PermissionDenied, "authentication_error", "A publishable key cannot capture payments"],
    ["RL_01", Code.ResourceExhausted, "rate_limit_error", "Too many requests"],
  ] as const)(
    "gives a thrown %s its Connect code and ErrorDetail, and notes it on the record",
    async (code, connectCode, type, message) => {
      const record = new RequestRecord();
      const client = clientOf({ retrievePayment: () => Promise.reject(new ApiError(code, message)) }, appInterceptors(record));
      expect(await failure(client.retrievePayment({ paymentId: "pay_1" }))).toEqual({ code: connectCode, detail: { type, code, message } });
      expect({ code: record.code, cause: record.cause }).toEqual({ code, cause: undefined });
    },
  );

  it("answers an unexpected failure HE_00 quoting the request id, keeping its cause for the log only", async () => {
    const record = new RequestRecord();
    const cause = new Error("connection to db-1.internal refused");
    const client = clientOf(
      {
        retrievePayment: () => {
          throw cause;
        },
      },
      appInterceptors(record),
    );
    const message = `Something went wrong on our side; the request may be retried (request ${record.id}).`;
    expect(await failure(client.retrievePayment({ paymentId: "pay_1" }))).toEqual({
      code: Code.Internal,
      detail: { type: "api_error", code: "HE_00", message },
    });
    expect({ code: record.code, cause: record.cause }).toEqual({ code: "HE_00", cause });
  });

  it("answers a method not built yet IR_00", async () => {
    const record = new RequestRecord();
    const client = clientOf({}, appInterceptors(record));
    expect(await failure(client.capturePayment({ paymentId: "pay_1" }))).toEqual({
      code: Code.Unimplemented,
      detail: {
        type: "invalid_request",
        code: "IR_00",
        message: "paymentservice.v1.PaymentService.CapturePayment is not implemented: this operation is not available yet",
      },
    });
    expect(record.code).toBe("IR_00");
  });

  it("passes an error already documented as it is", async () => {
    const error = documentedError(new ApiError("HE_01", "A payment with id pay_1 already exists"));
    const client = clientOf({ createPayment: () => Promise.reject(error) }, appInterceptors(new RequestRecord()));
    expect(await failure(client.createPayment({}))).toEqual({
      code: Code.AlreadyExists,
      detail: { type: "invalid_request", code: "HE_01", message: "A payment with id pay_1 already exists" },
    });
  });

  it("still answers HE_00, without a request id, when the call has no record", async () => {
    const client = clientOf({ retrievePayment: () => Promise.reject(new Error("x")) }, [outcomeInterceptor]);
    expect((await failure(client.retrievePayment({ paymentId: "pay_1" }))).detail).toEqual({
      type: "api_error",
      code: "HE_00",
      message: "Something went wrong on our side; the request may be retried.",
    });
  });
});

describe("deadlineInterceptor", () => {
  /** A retrievePayment handler that takes `ms` and then says whether it ran to its end. */
  function slowHandler(ms: number): { impl: Partial<ServiceImpl<typeof PaymentService>>; finished: () => boolean; started: () => boolean } {
    let started = false;
    let finished = false;
    return {
      impl: {
        retrievePayment: async (req) => {
          started = true;
          const work = sleep(ms).then(() => {
            finished = true;
          });
          pending.push(work);
          await work;
          return { paymentId: req.paymentId };
        },
      },
      started: () => started,
      finished: () => finished,
    };
  }

  const timeoutExceeded = {
    code: Code.DeadlineExceeded,
    detail: {
      type: "timeout_error",
      code: "TO_01",
      message:
        "The deadline the client set (grpc-timeout or connect-timeout-ms) passed before the call completed; " +
        "a call that had started may still complete: retry with the same idempotency key to learn its outcome",
    },
  };

  it("lets a call without a deadline take its time", async () => {
    const handler = slowHandler(60);
    const client = clientOf(handler.impl, appInterceptors(new RequestRecord()));
    expect(await client.retrievePayment({ paymentId: "pay_1" })).toMatchObject({ paymentId: "pay_1" });
  });

  it("lets a call that completes within its deadline answer", async () => {
    const handler = slowHandler(10);
    const client = clientOf(handler.impl, appInterceptors(new RequestRecord()));
    expect(await client.retrievePayment({ paymentId: "pay_1" }, { headers: { "connect-timeout-ms": "5000" } })).toMatchObject({
      paymentId: "pay_1",
    });
  });

  it("answers TO_01 when the deadline passes while the call runs, and lets the work run to its end", async () => {
    const record = new RequestRecord();
    const handler = slowHandler(300);
    const client = clientOf(handler.impl, appInterceptors(record));
    const started = Date.now();
    // Sent as a header rather than as the client's timeoutMs, so the answer is the server's, not a client-side timeout.
    expect(await failure(client.retrievePayment({ paymentId: "pay_1" }, { headers: { "connect-timeout-ms": "30" } }))).toEqual(
      timeoutExceeded,
    );
    expect(Date.now() - started).toBeLessThan(250);
    expect({ started: handler.started(), finished: handler.finished() }).toEqual({ started: true, finished: false });
    expect(record.code).toBe("TO_01");
    await Promise.allSettled(pending);
    expect(handler.finished()).toBe(true);
  });

  it("refuses TO_01, without running it, a call whose deadline passed before it started", async () => {
    const handler = slowHandler(0);
    // Stands in for whatever took the time before the call (reading a slow upload, admission).
    const late: Interceptor = (next) => async (req) => {
      await sleep(40);
      return next(req);
    };
    const record = new RequestRecord();
    const client = clientOf(handler.impl, [
      withRecord(record),
      outcomeInterceptor,
      late,
      deadlineInterceptor,
      createRequestRulesInterceptor(),
    ]);
    expect(await failure(client.retrievePayment({ paymentId: "pay_1" }, { headers: { "connect-timeout-ms": "10" } }))).toEqual(
      timeoutExceeded,
    );
    expect(handler.started()).toBe(false);
  });

  it("passes on the call's own failure when it comes before the deadline", async () => {
    const client = clientOf(
      { retrievePayment: () => Promise.reject(new ApiError("HE_02", "Payment not found: pay_1")) },
      appInterceptors(new RequestRecord()),
    );
    expect(
      (await failure(client.retrievePayment({ paymentId: "pay_1" }, { headers: { "connect-timeout-ms": "5000" } }))).detail?.code,
    ).toBe("HE_02");
  });

  it("leaves no unhandled rejection when a call fails after its deadline was answered", async () => {
    let fail!: (reason: unknown) => void;
    const client = clientOf({ retrievePayment: () => new Promise((_, reject) => (fail = reject)) }, appInterceptors(new RequestRecord()));
    expect((await failure(client.retrievePayment({ paymentId: "pay_1" }, { headers: { "connect-timeout-ms": "20" } }))).detail?.code).toBe(
      "TO_01",
    );
    fail(new Error("failed after the deadline"));
    // Vitest fails the run on an unhandled rejection; give one the chance to surface.
    await sleep(20);
  });

  it.each([
    ["an unparsable connect-timeout-ms", "soon"],
    ["a connect-timeout-ms of more than 10 digits", "12345678901"],
  ])("leaves %s to connect, which refuses it invalid_argument before any interceptor runs", async (_, timeout) => {
    const handler = slowHandler(0);
    const client = clientOf(handler.impl, appInterceptors(new RequestRecord()));
    expect((await failure(client.retrievePayment({ paymentId: "pay_1" }, { headers: { "connect-timeout-ms": timeout } }))).code).toBe(
      Code.InvalidArgument,
    );
    expect(handler.started()).toBe(false);
  });
});

describe("request rules", () => {
  let ran: boolean;
  const impl: Partial<ServiceImpl<typeof PaymentService>> = {
    retrievePayment: (req) => {
      ran = true;
      return { paymentId: req.paymentId };
    },
    capturePayment: (req) => {
      ran = true;
      return { paymentId: req.paymentId };
    },
    createPayment: () => {
      ran = true;
      return { paymentId: "pay_new" };
    },
    listPayments: () => {
      ran = true;
      return { totalCount: 0n };
    },
  };
  const client = () => {
    ran = false;
    return clientOf(impl, appInterceptors(new RequestRecord()));
  };

  it.each([
    [
      "RetrievePayment with an empty payment_id",
      (c: ReturnType<typeof client>) => c.retrievePayment({ paymentId: "" }),
      "IR_04",
      "Missing required field: payment_id",
    ],
    [
      "CapturePayment with no payment_id",
      (c: ReturnType<typeof client>) => c.capturePayment({}),
      "IR_04",
      "Missing required field: payment_id",
    ],
    [
      "a NUL in the path id",
      (c: ReturnType<typeof client>) => c.retrievePayment({ paymentId: "pay_\u0000" }),
      "IR_06",
      "Invalid value for field payment_id: text must not contain NUL",
    ],
    [
      "a NUL in a filter",
      (c: ReturnType<typeof client>) => c.listPayments({ customerId: "cus\u0000" }),
      "IR_06",
      "Invalid value for field customer_id: text must not contain NUL",
    ],
    [
      "a NUL in a metadata key",
      (c: ReturnType<typeof client>) => c.createPayment({ metadata: { "k\u0000": "v" } }),
      "IR_06",
      "Invalid value for field metadata (a key)",
    ],
    [
      "a NUL in a nested field",
      (c: ReturnType<typeof client>) => c.createPayment({ paymentMethodData: { card: { cardHolderName: "J\u0000" } } }),
      "IR_06",
      "Invalid value for field payment_method_data.card.card_holder_name",
    ],
    [
      "an enum number the enum lacks",
      (c: ReturnType<typeof client>) => c.listPayments({ status: 99 as PaymentStatus }),
      "IR_05",
      "Invalid value for field status: unknown value 99 of paymentservice.v1.PaymentStatus",
    ],
    [
      "a timestamp after year 9999",
      (c: ReturnType<typeof client>) => c.listPayments({ createdGte: { seconds: 253_402_300_800n } }),
      "IR_05",
      "Invalid value for field created_gte",
    ],
  ] as const)("refuse %s with %s naming the field, before the handler runs", async (_, call, code, message) => {
    const c = client();
    const { code: connectCode, detail } = await failure(call(c));
    expect({ connectCode, code: detail?.code, type: detail?.type }).toEqual({
      connectCode: Code.InvalidArgument,
      code,
      type: "invalid_request",
    });
    expect(detail?.message).toContain(message);
    expect(ran).toBe(false);
  });

  it.each([
    ["a method whose path binds no id, sent empty", (c: ReturnType<typeof client>) => c.createPayment({})],
    ["a list with every filter unset", (c: ReturnType<typeof client>) => c.listPayments({})],
    ["a retrieve with its id", (c: ReturnType<typeof client>) => c.retrievePayment({ paymentId: "pay_1" })],
    [
      "a known enum value and text beyond ASCII",
      (c: ReturnType<typeof client>) => c.listPayments({ status: PaymentStatus.SUCCEEDED, customerId: "cus_é😀" }),
    ],
  ] as const)("let %s through to the handler", async (_, call) => {
    const c = client();
    await call(c);
    expect(ran).toBe(true);
  });
});

describe("the interceptors in the app's order", () => {
  it("give the refusals of the interceptors after outcome their documented shape too", async () => {
    const record = new RequestRecord();
    const client = clientOf({ retrievePayment: () => ({}) }, appInterceptors(record));
    expect(await failure(client.retrievePayment({ paymentId: "" }))).toEqual({
      code: Code.InvalidArgument,
      detail: { type: "invalid_request", code: "IR_04", message: "Missing required field: payment_id" },
    });
    expect(record.code).toBe("IR_04");
  });

  it("would not, were outcome not outermost: a rule's refusal would reach clients as connect's bare internal error", async () => {
    const client = clientOf({ retrievePayment: () => ({}) }, [createRequestRulesInterceptor(), outcomeInterceptor]);
    expect(await failure(client.retrievePayment({ paymentId: "" }))).toEqual({ code: Code.Internal, detail: undefined });
  });

  it("check the deadline before the message: a late call is TO_01 whatever it carries", async () => {
    const late: Interceptor = (next) => async (req) => {
      await sleep(40);
      return next(req);
    };
    const client = clientOf({ retrievePayment: () => ({}) }, [
      outcomeInterceptor,
      late,
      deadlineInterceptor,
      createRequestRulesInterceptor(),
    ]);
    expect((await failure(client.retrievePayment({ paymentId: "" }, { headers: { "connect-timeout-ms": "10" } }))).detail?.code).toBe(
      "TO_01",
    );
  });

  it("carry the response headers the handler sets to the client", async () => {
    const client = clientOf(
      {
        retrievePayment: (req, ctx) => {
          ctx.responseHeader.set("idempotent-replayed", "true");
          return { paymentId: req.paymentId };
        },
      },
      appInterceptors(new RequestRecord()),
    );
    let header: Headers | undefined;
    await client.retrievePayment({ paymentId: "pay_1" }, { headers: { "connect-timeout-ms": "5000" }, onHeader: (h) => (header = h) });
    expect(header?.get("idempotent-replayed")).toBe("true");
  });

  it("carry the request headers to the handler", async () => {
    let seen: string | null = null;
    const client = clientOf(
      {
        retrievePayment: (req, ctx) => {
          seen = ctx.requestHeader.get("idempotency-key");
          return { paymentId: req.paymentId };
        },
      },
      appInterceptors(new RequestRecord()),
    );
    await client.retrievePayment({ paymentId: "pay_1" }, { headers: { "idempotency-key": "k-1" } });
    expect(seen).toBe("k-1");
  });
});
