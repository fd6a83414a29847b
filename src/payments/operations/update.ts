import type { EntityManager } from "typeorm";
import type { Clock } from "../../clock.js";
import type { Scope } from "../../db/scope.js";
import type { NewJob } from "../../jobs/runner.js";
import { lockUnclaimed } from "../../objects/claims.js";
import type { LockedOperation } from "../../objects/locked-operation.js";
import type { PaymentRow } from "../payment.entity.js";
import { paymentStates } from "../states.js";
import { paymentResource } from "../store.js";

/*
 * Update (interface §4): the fields a payment may still change before it is confirmed. It calls no
 * processor, so it locks the payment in the transaction that writes it, after any operation that
 * holds the payment's claim (waitingForClaims).
 */

/** An update's fields, validated by the API (service.ts); `apply` sets them on the locked row, reading what it must check in `em`. */
export interface PaymentUpdate {
  readonly amount: bigint | undefined;
  apply(row: PaymentRow, em: EntityManager): Promise<void>;
}

/** The update of payment `paymentId`. */
export function updateOperation(
  clock: Clock,
  scope: Scope,
  paymentId: string,
  update: PaymentUpdate,
): LockedOperation<PaymentRow, readonly NewJob[]> {
  return {
    lock: (em) => lockUnclaimed(em, clock, paymentResource, scope, paymentId),
    async decide(row, em) {
      paymentStates.guard("update", row.status);
      await update.apply(row, em);
      if (update.amount !== undefined) {
        row.amount = update.amount;
        // Interface §3: an amount on a payment without a method moves it to requires_confirmation.
        if (row.status === "requires_payment_method") paymentStates.move(row, "update", "requires_confirmation");
      }
      row.modifiedAt = clock.now();
      return [];
    },
  };
}
