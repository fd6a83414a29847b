import type { Clock } from "../../clock.js";
import type { Scope } from "../../db/scope.js";
import { preconditionFailed } from "../../errors.js";
import type { NewJob } from "../../jobs/runner.js";
import { lockUnclaimed } from "../../objects/claims.js";
import type { LockedOperation } from "../../objects/locked-operation.js";
import type { RefundRow } from "../refund.entity.js";
import { refundStates } from "../states.js";
import { refundResource } from "../store.js";

/*
 * Cancel (decisions §9): a scheduled refund still pending, before its settlement run sends it. Its
 * final status ends its processing job in the statement that writes it.
 */

/** The cancel of refund `refundId`. */
export function cancelOperation(clock: Clock, scope: Scope, refundId: string): LockedOperation<RefundRow, readonly NewJob[]> {
  return {
    lock: (em) => lockUnclaimed(em, clock, refundResource, scope, refundId),
    decide(row) {
      if (row.refundType !== "scheduled") {
        throw preconditionFailed(`This refund cannot be cancelled: it is instant (${row.status}); only a pending scheduled refund can`);
      }
      refundStates.guard("cancel", row.status);
      refundStates.move(row, "cancel", "cancelled");
      row.updated = clock.now();
      return [];
    },
  };
}
