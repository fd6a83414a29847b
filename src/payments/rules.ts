import { ApiError, type ErrorCode } from "../errors.js";
import type { PaymentStatusWord } from "./payment.entity.js";

/*
 * The payment state machine (interface §3, decisions §4): which operation is allowed from which
 * status. Every operation locks the payment row first, so two operations can never both pass these
 * checks for the same payment.
 */

/** Statuses from which nothing changes any more. */
export const terminalStatuses: ReadonlySet<PaymentStatusWord> = new Set(["succeeded", "failed", "cancelled"]);

/** Each operation, the statuses it may start from, and the error code of a wrong status. */
const allowedFrom = {
  update: { from: ["requires_payment_method", "requires_confirmation"], code: "IR_16" },
  confirm: { from: ["requires_payment_method", "requires_confirmation"], code: "IR_16" },
  capture: { from: ["requires_capture"], code: "IR_14" },
  cancel: { from: ["requires_payment_method", "requires_confirmation", "requires_action", "requires_capture"], code: "IR_16" },
  authenticate: { from: ["requires_action"], code: "IR_16" },
} as const satisfies Record<string, { from: readonly PaymentStatusWord[]; code: ErrorCode }>;

/** An operation on a payment. */
export type PaymentOperation = keyof typeof allowedFrom;

/** Throws IR_14/IR_16 naming the current and the expected statuses unless `operation` is allowed now. */
export function assertAllowed(operation: PaymentOperation, status: PaymentStatusWord): void {
  const rule = allowedFrom[operation];
  if (!(rule.from as readonly PaymentStatusWord[]).includes(status)) {
    throw new ApiError(
      rule.code,
      `This payment cannot be ${pastTense[operation]} because its status is ${status}; expected ${rule.from.join(" or ")}`,
    );
  }
}

const pastTense: Record<PaymentOperation, string> = {
  update: "updated",
  confirm: "confirmed",
  capture: "captured",
  cancel: "cancelled",
  authenticate: "authenticated",
};

/** How long a manual-capture authorization holds the funds (interface §3). */
export const authorizationValidityMs = 7 * 24 * 60 * 60 * 1000;
