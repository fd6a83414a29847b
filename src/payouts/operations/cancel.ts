import type { Clock } from "../../clock.js";
import type { Scope } from "../../db/scope.js";
import type { NewJob } from "../../jobs/runner.js";
import type { LockedOperation } from "../../objects/locked-operation.js";
import type { PayoutRow } from "../payout.entity.js";
import { payoutStates } from "../states.js";
import { lockPayout } from "../store.js";

/** Cancel (interface §4): a payout not yet confirmed; its encrypted destination goes with its final status (store.ts). */
export function cancelOperation(clock: Clock, scope: Scope, payoutId: string): LockedOperation<PayoutRow, readonly NewJob[]> {
  return {
    lock: (em) => lockPayout(em, scope, payoutId),
    decide(row) {
      payoutStates.guard("cancel", row.status);
      payoutStates.move(row, "cancel", "cancelled");
      row.updated = clock.now();
      return [];
    },
  };
}
