/*
 * The requests the benchmarks send, in one place: each scenario (bench/payments.ts over autocannon,
 * bench/grpc.ts over h2load, bench/mix.ts over undici) builds its calls from these, so a scenario
 * measures the same payment whatever drives it.
 */
import { create, toBinary } from "@bufbuild/protobuf";
import { CreatePaymentRequestSchema } from "../gen/paymentservice/v1/payment_pb.js";

/** What each payment of the benchmarks costs, in the smallest unit; a partial refund takes a tenth. */
export const paymentAmount = 1000;
/** A partial refund's amount: one tenth, so a payment could take ten. */
export const refundAmount = 100;

/** The 4242 test card: the sandbox processor approves it. */
export const card = { card_number: "4242424242424242", card_exp_month: "12", card_exp_year: "2035", card_cvc: "123" };

/** The body of a REST create-with-confirm of `amount` paid with the 4242 card: every benchmark's payment, `extra` its variations. */
export function confirmedPayment(profileId: string, amount = paymentAmount, extra: Record<string, unknown> = {}) {
  return { amount, currency: "USD", profile_id: profileId, confirm: true, payment_method_data: { card }, ...extra };
}

/** REST bodies of the documented dialect (docs/payments.md, docs/refunds.md). */
export const rest = {
  create: (profileId: string, options: { confirm?: boolean; manualCapture?: boolean } = {}) => {
    const capture = options.manualCapture ? { capture_method: "manual" } : {};
    return options.confirm
      ? confirmedPayment(profileId, paymentAmount, capture)
      : { amount: paymentAmount, currency: "USD", profile_id: profileId, ...capture };
  },
  /** The merchant's backend confirming with its secret key. */
  confirm: () => ({ payment_method_data: { card } }),
  /** A checkout page confirming with the publishable key: the payment's client_secret proves it may. */
  checkoutConfirm: (clientSecret: string) => ({ client_secret: clientSecret, payment_method_data: { card } }),
  refund: (paymentId: string) => ({ payment_id: paymentId, amount: refundAmount }),
  /** The zero-amount setup that saves the 4242 card for a customer with a multi-use mandate (docs/payment-methods.md). */
  offSessionSetup: (profileId: string, customerId: string) => ({
    amount: 0,
    currency: "USD",
    profile_id: profileId,
    confirm: true,
    customer_id: customerId,
    setup_future_usage: "off_session",
    customer_acceptance: { acceptance_type: "offline" },
    payment_method_data: { card },
  }),
  /** A merchant-initiated charge of the customer's saved card under its mandate. */
  offSessionCharge: (profileId: string, saved: SavedCard) => ({
    amount: paymentAmount,
    currency: "USD",
    profile_id: profileId,
    confirm: true,
    off_session: true,
    customer_id: saved.customerId,
    payment_method_id: saved.paymentMethodId,
  }),
};

/** A customer's card saved with a mandate, for merchant-initiated charges. */
export interface SavedCard {
  readonly customerId: string;
  readonly paymentMethodId: string;
}

/** The 4242 card as the proto message's JSON (camelCase) spells it. */
const connectCard = {
  cardNumber: card.card_number,
  cardExpMonth: card.card_exp_month,
  cardExpYear: card.card_exp_year,
  cardCvc: card.card_cvc,
};

/** The create-with-confirm request as a protobuf message, for Connect's binary codec and for gRPC. */
function createWithConfirmMessage(profileId: string): Uint8Array {
  return toBinary(
    CreatePaymentRequestSchema,
    create(CreatePaymentRequestSchema, {
      amount: BigInt(paymentAmount),
      currency: "USD",
      profileId,
      confirm: true,
      paymentMethodData: { card: connectCard },
    }),
  );
}

/** The create-with-confirm request as a gRPC message on the wire: a flag byte (not compressed), the length (big-endian), the message. */
export function grpcCreateWithConfirmFrame(profileId: string): Buffer {
  const message = createWithConfirmMessage(profileId);
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  return frame;
}

/** How autocannon calls one protocol: the paths, content type and bodies of create and confirm. */
export interface Protocol {
  readonly contentType: string;
  readonly createPath: string;
  confirmPath(id: string): string;
  create(confirm: boolean): string | Buffer;
  confirm(id: string): string;
  idOf(body: string): string;
}

/** Protocols autocannon speaks: REST's documented dialect, Connect with proto JSON, Connect with binary protobuf (create with confirm only). */
export type ProtocolName = "REST" | "Connect JSON" | "Connect binary";

/** Request shapes of one protocol. */
export function protocolOf(name: ProtocolName, profileId: string): Protocol {
  if (name === "REST") {
    return {
      contentType: "application/json",
      createPath: "/payments",
      confirmPath: (id) => `/payments/${id}/confirm`,
      create: (confirm) => JSON.stringify(rest.create(profileId, { confirm })),
      confirm: () => JSON.stringify(rest.confirm()),
      idOf: (body) => (JSON.parse(body) as { payment_id: string }).payment_id,
    };
  }
  const connect = {
    createPath: "/paymentservice.v1.PaymentService/CreatePayment",
    confirmPath: () => "/paymentservice.v1.PaymentService/ConfirmPayment",
    confirm: (id: string) => JSON.stringify({ paymentId: id, paymentMethodData: { card: connectCard } }),
    idOf: (body: string) => (JSON.parse(body) as { paymentId: string }).paymentId,
  };
  if (name === "Connect binary") {
    return {
      ...connect,
      contentType: "application/proto",
      create: (confirm) => {
        // Only create with confirm is measured in binary: reading the id of a binary answer for the confirm would need parsing in autocannon's loop.
        if (!confirm) throw new Error("Connect binary is measured for create with confirm only");
        return Buffer.from(createWithConfirmMessage(profileId));
      },
    };
  }
  return {
    ...connect,
    contentType: "application/json",
    create: (confirm) =>
      JSON.stringify({
        amount: String(paymentAmount),
        currency: "USD",
        profileId,
        ...(confirm ? { confirm: true, paymentMethodData: { card: connectCard } } : {}),
      }),
  };
}
