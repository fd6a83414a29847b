import type { Clock } from "../../clock.js";
import type { Scope } from "../../db/scope.js";
import type { NewJob } from "../../jobs/runner.js";
import type { LockedOperation } from "../../objects/locked-operation.js";
import type { DisputeRow } from "../dispute.entity.js";
import { disputeStates } from "../states.js";
import { lockDisputeWithPayment } from "../store.js";

/** Resolve (the sandbox's ResolveDispute): the network decides a challenged dispute, won or lost. */
export function resolveOperation(
  clock: Clock,
  scope: Scope,
  disputeId: string,
  outcome: "won" | "lost",
): LockedOperation<DisputeRow, readonly NewJob[]> {
  return {
    lock: (em) => lockDisputeWithPayment(em, scope, disputeId),
    decide(row) {
      disputeStates.guard("resolve", row.status);
      disputeStates.move(row, "resolve", outcome);
      row.updated = clock.now();
      return [];
    },
  };
}
