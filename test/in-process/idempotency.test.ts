import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type CallOptions, type Client } from "@connectrpc/connect";
import { beforeEach, describe, expect, it } from "vitest";
import { PaymentService, PaymentStatus, type CreatePaymentRequestSchema } from "../../gen/paymentservice/v1/payment_pb.js";
import { expectRpcError } from "../support/errors.js";
import { inProcessSuite } from "../support/in-process.js";
import { ScriptedProcessor } from "../support/scripted-processor.js";
import { waitUntil } from "../support/wait.js";

/*
 * Idempotency keys (docs/idempotency.md) through the router transport: the interceptor with its key
 * table on the real database, the payment service behind it, a scripted processor in front of the
 * money. What matters at this level is what reaches the processor: a replay asks it nothing, and a
 * retry that does run again carries the processor key of the first attempt.
 */

const processor = new ScriptedProcessor("scripted");
const suite = inProcessSuite(processor);
let payments: Client<typeof PaymentService>;

beforeEach(() => {
  payments = suite.client(PaymentService);
});

const card = { cardNumber: "4242424242424242", cardExpMonth: "12", cardExpYear: "2031", cardCvc: "123" };

/** A create-and-confirm of `amount` EUR, with the caller's `paymentId` if given. */
function purchase(amount: bigint, paymentId?: string): MessageInitShape<typeof CreatePaymentRequestSchema> {
  return { amount, currency: "EUR", profileId: suite.merchant.profileId, paymentId, confirm: true, paymentMethodData: { card } };
}

/** Call options sending `key`, recording whether the answer was a replay. */
function withKey(key: string, seen: { replayed?: string | null } = {}): CallOptions {
  return { headers: { "x-idempotency-key": key }, onHeader: (header) => (seen.replayed = header.get("idempotent-replayed")) };
}

describe("a repeated key", () => {
  it("replays the first answer without asking the processor again", async () => {
    const first = await payments.createPayment(purchase(1250n), withKey("order-1"));
    const seen: { replayed?: string | null } = {};

    const replay = await payments.createPayment(purchase(1250n), withKey("order-1", seen));

    expect(seen.replayed).toBe("true");
    expect(replay).toEqual(first);
    expect(processor.calls.map((call) => call.method)).toEqual(["authorize"]);
    expect((await payments.listPayments({})).totalCount).toBe(1n);
  });

  it("replays a decline as the answer it was, not as an error to run again", async () => {
    processor.script("authorize", { status: "declined", errorCode: "card_declined", errorMessage: "Your card was declined." });
    const first = await payments.createPayment(purchase(1250n), withKey("order-2"));

    const replay = await payments.createPayment(purchase(1250n), withKey("order-2"));

    expect(replay).toEqual(first);
    expect(replay).toMatchObject({ status: PaymentStatus.FAILED, errorCode: "card_declined" });
    expect(processor.callsTo("authorize")).toHaveLength(1);
  });

  it("with another request answers IK_02 and asks the processor nothing", async () => {
    await payments.createPayment(purchase(1250n), withKey("order-3"));

    await expectRpcError(payments.createPayment(purchase(1300n), withKey("order-3")), Code.InvalidArgument, "IK_02");

    expect(processor.callsTo("authorize")).toMatchObject([{ amount: 1250n }]);
  });
});

describe("a failed attempt", () => {
  it("frees the key, and the retry finishes the first attempt with its processor key", async () => {
    processor.script("authorize", new Error("read ECONNRESET"));
    await expectRpcError(payments.createPayment(purchase(1250n, "pay_idem_retry"), withKey("order-4")), Code.Internal, "HE_00");

    const retried = await payments.createPayment(purchase(1250n, "pay_idem_retry"), withKey("order-4"));

    expect(retried.status).toBe(PaymentStatus.SUCCEEDED);
    const [first, second] = processor.callsTo("authorize");
    expect(second).toEqual(first);
    expect(second?.idempotencyKey).toMatch(new RegExp(`^${suite.merchant.merchantId}:pay_idem_retry:authorize:`));
  });
});

describe("a client that gives up", () => {
  it("gets its deadline, while the call runs to its end and a retry with the key learns the outcome", async () => {
    let answer!: () => void;
    processor.script("authorize", new Promise((resolve) => (answer = () => resolve({ status: "captured" }))));

    const call = payments.createPayment(purchase(1250n), { ...withKey("order-5"), timeoutMs: 50 });
    const error = await call.then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect(ConnectError.from(error).code).toBe(Code.DeadlineExceeded);
    answer();

    // On PostgreSQL the first call may still be committing (IK_01, "retry later"); the embedded database waits for it.
    const seen: { replayed?: string | null } = {};
    const outcome = await waitUntil(
      () => payments.createPayment(purchase(1250n), withKey("order-5", seen)).catch((reason: unknown) => ConnectError.from(reason)),
      (result) => !(result instanceof ConnectError && result.code === Code.Aborted),
    );

    expect(outcome).toMatchObject({ status: PaymentStatus.SUCCEEDED, amountReceived: 1250n });
    expect(seen.replayed).toBe("true");
    expect(processor.callsTo("authorize")).toHaveLength(1);
  });
});
