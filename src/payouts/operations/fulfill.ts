import type { Clock } from "../../clock.js";
import type { Scope } from "../../db/scope.js";
import type { NewJob } from "../../jobs/runner.js";
import type { LockedOperation } from "../../objects/locked-operation.js";
import type { PayoutRow } from "../payout.entity.js";
import { payoutStates } from "../states.js";
import { lockPayout, sendJobOf } from "../store.js";

/** Fulfill (interface §4): a payout created with confirm: false is confirmed, and its sending job scheduled now. */
export function fulfillOperation(clock: Clock, scope: Scope, payoutId: string): LockedOperation<PayoutRow, readonly NewJob[]> {
  return {
    lock: (em) => lockPayout(em, scope, payoutId),
    decide(row) {
      payoutStates.guard("fulfill", row.status);
      const now = clock.now();
      payoutStates.move(row, "fulfill", "pending");
      row.updated = now;
      return [sendJobOf(row, now)];
    },
  };
}
