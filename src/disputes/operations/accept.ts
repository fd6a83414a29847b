import type { Clock } from "../../clock.js";
import type { Scope } from "../../db/scope.js";
import type { NewJob } from "../../jobs/runner.js";
import type { LockedOperation } from "../../objects/locked-operation.js";
import type { DisputeRow } from "../dispute.entity.js";
import { disputeStates } from "../states.js";
import { lockDisputeWithPayment } from "../store.js";

/** Accept (interface §4): the merchant gives up the dispute, which is lost; its evidence is dropped. */
export function acceptOperation(clock: Clock, scope: Scope, disputeId: string): LockedOperation<DisputeRow, readonly NewJob[]> {
  return {
    lock: (em) => lockDisputeWithPayment(em, scope, disputeId),
    decide(row) {
      disputeStates.guard("accept", row.status);
      disputeStates.move(row, "accept", "accepted");
      row.evidence = null;
      row.updated = clock.now();
      return [];
    },
  };
}
