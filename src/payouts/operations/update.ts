import type { Clock } from "../../clock.js";
import type { Scope } from "../../db/scope.js";
import type { NewJob } from "../../jobs/runner.js";
import type { LockedOperation } from "../../objects/locked-operation.js";
import { mergeMetadata } from "../../validation/metadata.js";
import type { PayoutRow } from "../payout.entity.js";
import { lockPayout } from "../store.js";

/** Update (interface §4): a payout's metadata, in any status; everything else is fixed at creation. */
export function updateOperation(
  clock: Clock,
  scope: Scope,
  payoutId: string,
  metadata: Record<string, string>,
): LockedOperation<PayoutRow, readonly NewJob[]> {
  return {
    lock: (em) => lockPayout(em, scope, payoutId),
    decide(row) {
      row.metadata = mergeMetadata("metadata", row.metadata, metadata);
      row.updated = clock.now();
      return [];
    },
  };
}
