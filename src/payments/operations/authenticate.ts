import { attemptKey, capturesOnAuthorization, type PaymentMoveDependencies } from "../attempts.js";
import type { PaymentOperation } from "../operation.js";
import type { PaymentRow } from "../payment.entity.js";
import { paymentStates } from "../states.js";

/*
 * 3D Secure completion (decisions §3): the cardholder's answer on the challenge page
 * (authentication-page.ts) finishes the authorization that asked for it.
 */

/** Completes the authentication of the payment behind the page's `token`, unless it no longer waits for that token. */
export function authenticateOperation(deps: PaymentMoveDependencies, token: string, authenticated: boolean): PaymentOperation {
  const awaitsThisToken = (row: PaymentRow) => paymentStates.allows("authenticate", row.status) && row.authenticationToken === token;
  return {
    check: awaitsThisToken,
    move: (row) => {
      paymentStates.guard("authenticate", row.status);
      return {
        call: "completeAuthentication",
        key: attemptKey(row, "completeAuthentication"),
        processor: row.processor!,
        capture: capturesOnAuthorization(row, deps.clock.now()),
        authenticated,
      };
    },
  };
}
