import type { Clock } from "../../clock.js";
import type { Scope } from "../../db/scope.js";
import { preconditionFailed } from "../../errors.js";
import type { NewJob } from "../../jobs/runner.js";
import type { LockedOperation } from "../../objects/locked-operation.js";
import type { DisputeRow, StoredEvidence } from "../dispute.entity.js";
import { disputeStates } from "../states.js";
import { lockDispute } from "../store.js";

/**
 * Submit evidence (decisions §9): the merchant challenges the dispute by its evidence_due_by, or adds
 * to the evidence of one it challenged. It decides nothing about the payment, so only the dispute is locked.
 */
export function submitEvidenceOperation(
  clock: Clock,
  scope: Scope,
  disputeId: string,
  evidence: StoredEvidence,
): LockedOperation<DisputeRow, readonly NewJob[]> {
  return {
    lock: (em) => lockDispute(em, scope, disputeId),
    decide(row) {
      disputeStates.guard("submitEvidence", row.status);
      // Evidence counts only if it arrives by evidence_due_by; the expiry job may not have run yet.
      if (row.status === "opened" && clock.now() > row.evidenceDueBy) {
        throw preconditionFailed(
          `This dispute can no longer be given evidence: evidence_due_by ${row.evidenceDueBy.toISOString()} has passed and it expires`,
        );
      }
      disputeStates.move(row, "submitEvidence", "challenged");
      row.evidence = evidence;
      row.updated = clock.now();
      return [];
    },
  };
}
