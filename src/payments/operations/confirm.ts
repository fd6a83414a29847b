import { payingCustomer, type SavedCard } from "../../payment-methods/pay-with.js";
import { cardView } from "../../processors/card.js";
import type { CardDetails } from "../../processors/processor.js";
import { attemptKey, capturesOnAuthorization, type PaymentMoveDependencies } from "../attempts.js";
import type { CardSavingDependencies } from "../../payment-methods/setup.js";
import { applySetup, assertSetupCustomer, cardToSave, recordAlongside, type SetupRequest } from "../future-usage.js";
import type { PaymentOperation } from "../operation.js";
import type { AttemptCall, PaymentRow } from "../payment.entity.js";
import { paymentStates } from "../states.js";

/*
 * Confirm (interface §4): authorize the card the API call sent, at the processor the payment's
 * environment gets, capturing at once unless the capture is manual or scheduled for later. A create
 * with confirm: true makes the same move on the payment it records (operations/create.ts).
 */

/** What a confirm call brings besides the card: its own check of the caller (the client secret), and fields it sets. */
export interface ConfirmRequest {
  readonly card: CardDetails;
  /** The processor's name, the one the payment's environment gets. */
  readonly processor: string;
  /** Throws when the caller may not confirm this payment (a publishable key without its client_secret). */
  readonly checkCaller: (row: PaymentRow) => void;
  readonly paymentMethodType: string | undefined;
  readonly returnUrl: string | undefined;
  /** The saved payment method it pays with, if the call named one (`card` is then its card). */
  readonly saved: SavedCard | undefined;
  /** What the call asks of the card's future use. */
  readonly setup: SetupRequest;
}

/** The confirm operation of the API. */
export function confirmOperation(deps: PaymentMoveDependencies & CardSavingDependencies, request: ConfirmRequest): PaymentOperation {
  return {
    card: request.card,
    alongside: (row) =>
      recordAlongside(deps, row, {
        save: row.setupFutureUsage === null ? undefined : cardToSave(request.saved === undefined ? request.card : undefined, request.saved),
      }),
    // The status is guarded once, by the move (`authorization`), which create with confirm shares.
    check: (row) => {
      request.checkCaller(row);
      return true;
    },
    move: (row) => {
      if (request.saved !== undefined) {
        // Checked again on the payment as claimed: an update may have given it a customer meanwhile.
        row.customerId = payingCustomer(request.saved, row.customerId);
        row.paymentMethodId = request.saved.paymentMethodId;
      }
      if (request.paymentMethodType !== undefined) row.paymentMethodType = request.paymentMethodType;
      if (request.returnUrl !== undefined) row.returnUrl = request.returnUrl;
      const attempt = authorization(deps, row, request.processor, request.card);
      applySetup(row, request.setup, deps.clock.now());
      assertSetupCustomer(row);
      return attempt;
    },
  };
}

/** The authorization a confirm asks of `processor`, with what is kept of the card to show once it is answered. */
export function authorization(deps: PaymentMoveDependencies, row: PaymentRow, processor: string, card: CardDetails): AttemptCall {
  paymentStates.guard("confirm", row.status);
  const view = cardView(card);
  return {
    call: "authorize",
    key: attemptKey(row, "authorize"),
    processor,
    capture: capturesOnAuthorization(row, deps.clock.now()),
    card: { last4: view.last4, brand: view.brand, exp_month: view.expMonth, exp_year: view.expYear },
    offSession: row.offSession,
  };
}
