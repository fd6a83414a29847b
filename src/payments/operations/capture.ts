import { invalidField } from "../../errors.js";
import { attemptKey } from "../attempts.js";
import type { PaymentOperation } from "../operation.js";
import type { AttemptCall, PaymentRow } from "../payment.entity.js";
import { paymentStates } from "../states.js";

/*
 * Capture (interface §4): take `amount_to_capture` (by default all) of an authorization, once; the
 * rest is released. The API asks for it; the job runner does at a scheduled payment's capture_on.
 */

/** The capture of the API: a payment not awaiting capture, or an amount above what it may capture, is refused. */
export function captureOperation(requested: bigint | undefined): PaymentOperation {
  return {
    check: (row) => {
      paymentStates.guard("capture", row.status);
      if (requested !== undefined && requested > row.amountCapturable) {
        throw invalidField("amount_to_capture", `at most the amount_capturable of ${row.amountCapturable}`);
      }
      return true;
    },
    move: (row) => capture(row, requested ?? row.amountCapturable),
  };
}

/** The scheduled capture (job `payment.capture_scheduled`): all of it, unless the payment moved on meanwhile. */
export function scheduledCaptureOperation(): PaymentOperation {
  return {
    check: (row) => paymentStates.allows("capture", row.status),
    move: (row) => capture(row, row.amountCapturable),
  };
}

function capture(row: PaymentRow, amount: bigint): AttemptCall {
  paymentStates.guard("capture", row.status);
  return { call: "capture", key: attemptKey(row, "capture"), processor: row.processor!, amount: amount.toString() };
}
