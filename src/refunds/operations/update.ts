import type { Clock } from "../../clock.js";
import type { Scope } from "../../db/scope.js";
import type { NewJob } from "../../jobs/runner.js";
import { lockUnclaimed } from "../../objects/claims.js";
import type { LockedOperation } from "../../objects/locked-operation.js";
import { mergeMetadata } from "../../validation/metadata.js";
import type { RefundRow } from "../refund.entity.js";
import { refundResource } from "../store.js";

/** Update (interface §4): a refund's reason and metadata, in any status; its amount and payment never change. */
export function updateOperation(
  clock: Clock,
  scope: Scope,
  refundId: string,
  update: { readonly reason: string | null | undefined; readonly metadata: Record<string, string> },
): LockedOperation<RefundRow, readonly NewJob[]> {
  return {
    lock: (em) => lockUnclaimed(em, clock, refundResource, scope, refundId),
    decide(row) {
      if (update.reason !== undefined) row.reason = update.reason;
      row.metadata = mergeMetadata("metadata", row.metadata, update.metadata);
      row.updated = clock.now();
      return [];
    },
  };
}
