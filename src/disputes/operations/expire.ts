import type { Clock } from "../../clock.js";
import type { Scope } from "../../db/scope.js";
import type { LockedOperation } from "../../objects/locked-operation.js";
import type { DisputeRow } from "../dispute.entity.js";
import { disputeStates } from "../states.js";
import { lockDisputeWithPayment } from "../store.js";

/**
 * Expiry (job `dispute.expire`, at evidence_due_by): an opened dispute that got no evidence in time
 * counts as lost. One challenged meanwhile is left alone.
 */
export function expireOperation(clock: Clock, scope: Scope, disputeId: string): LockedOperation<DisputeRow> {
  return {
    // Payment first, as every dispute change: the dispute's new status changes the payment's row.
    lock: (em) => lockDisputeWithPayment(em, scope, disputeId),
    decide(row) {
      if (!disputeStates.allows("expire", row.status)) return "leave";
      disputeStates.move(row, "expire", "expired");
      row.updated = clock.now();
      return [];
    },
  };
}
