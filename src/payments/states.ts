import { StateMachine } from "../state-machine.js";
import type { PaymentStatusWord } from "./payment.entity.js";

/** Statuses a payment may be confirmed or authenticated into, depending on the processor's answer. */
const authorizationOutcomes: readonly PaymentStatusWord[] = ["succeeded", "requires_capture", "requires_action", "failed"];

/** What can be done to a payment. */
export type PaymentOperation = "update" | "confirm" | "settle" | "authenticate" | "capture" | "cancel" | "expire" | "refund" | "dispute";

/**
 * The payment state machine (interface §3, decisions §4). Every operation locks the payment row
 * before its guard, so two operations can never both pass it for the same payment.
 */
export const paymentStates = new StateMachine<PaymentStatusWord, PaymentOperation>(
  "payment",
  {
    update: { from: ["requires_payment_method", "requires_confirmation"], to: ["requires_confirmation"], action: "updated" },
    confirm: { from: ["requires_payment_method", "requires_confirmation"], to: authorizationOutcomes, action: "confirmed" },
    /**
     * A payment created with confirm: true is recorded in processing before its processor is asked;
     * the answer settles it, or, when the processor never received the call, it waits for a method.
     */
    settle: { from: ["processing"], to: [...authorizationOutcomes, "requires_payment_method"], action: "settled" },
    authenticate: { from: ["requires_action"], to: ["succeeded", "requires_capture", "failed"], action: "authenticated" },
    capture: { from: ["requires_capture"], to: ["succeeded", "failed"], action: "captured", code: "IR_14" },
    cancel: {
      from: ["requires_payment_method", "requires_confirmation", "requires_action", "requires_capture"],
      to: ["cancelled"],
      action: "cancelled",
    },
    /** A manual-capture authorization that was not captured in time. */
    expire: { from: ["requires_capture"], to: ["cancelled"], action: "expired" },
    /** Refunds and disputes need the money to have been taken; they leave the payment as it is. */
    refund: { from: ["succeeded"], to: [], action: "refunded", code: "IR_14" },
    dispute: { from: ["succeeded"], to: [], action: "disputed", code: "IR_14" },
  },
  ["succeeded", "failed", "cancelled"],
);

/** How long a manual-capture authorization holds the funds (interface §3). */
export const authorizationValidityMs = 7 * 24 * 60 * 60 * 1000;
