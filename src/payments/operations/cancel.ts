import { applyCancel, attemptKey, type PaymentMoveDependencies } from "../attempts.js";
import type { PaymentOperation } from "../operation.js";
import type { AttemptCall, PaymentRow } from "../payment.entity.js";
import { paymentStates } from "../states.js";

/*
 * Cancel (interface §4), at the merchant's request, and the expiry of a manual-capture authorization
 * nobody captured in 7 days (job `payment.expire_authorization`): an authorization the processor
 * holds is voided first; a payment without one is cancelled at once, asking the processor nothing.
 */

/** The cancel of the API, with the merchant's reason. */
export function cancelOperation(deps: PaymentMoveDependencies, reason: string): PaymentOperation {
  return {
    check: (row) => {
      paymentStates.guard("cancel", row.status);
      return true;
    },
    move: (row) => cancel(deps, row, "cancel", reason),
  };
}

/** The expiry of an authorization, unless the payment moved on meanwhile. */
export function expireOperation(deps: PaymentMoveDependencies): PaymentOperation {
  return {
    check: (row) => paymentStates.allows("expire", row.status),
    move: (row) => cancel(deps, row, "expire", "expired"),
  };
}

function cancel(deps: PaymentMoveDependencies, row: PaymentRow, operation: "cancel" | "expire", reason: string): AttemptCall | undefined {
  paymentStates.guard(operation, row.status);
  if (row.status === "requires_capture" && row.processorReference !== null) {
    return { call: "void", key: attemptKey(row, "void"), processor: row.processor!, operation, reason };
  }
  applyCancel(deps, row, operation, reason);
  return undefined;
}
