import type { DataSource } from "typeorm";
import type { Clock } from "../clock.js";
import type { ObjectClaims } from "../objects/claims.js";
import { BatchedReads } from "../db/batched-reads.js";
import type { ObjectWriter } from "../objects/writer.js";
import { jobKinds, type JobKind } from "../jobs/kinds.js";
import { jobLeaseMs as leaseMs } from "../leases.js";
import type { LeasedJobHandler } from "../jobs/runner.js";
import type { ProcessorRegistry } from "../processors/registry.js";
import { refundStates } from "./states.js";
import { refundResource } from "./store.js";

/** What refund processing needs: the database, its claims and writer, time, and the processors (a refund goes to its payment's). */
export interface RefundJobDependencies {
  readonly dataSource: DataSource;
  readonly clock: Clock;
  readonly processors: ProcessorRegistry;
  readonly claims: ObjectClaims;
  readonly writer: ObjectWriter;
}

/** A refund's payment as its processor knows it: the jobs of one claim read theirs in one statement. */
const paymentsAtProcessor = new BatchedReads<{ processor: string | null; reference: string }>(
  "payments",
  "payment_id",
  "t.processor, t.processor_reference AS reference",
);

/**
 * Sends a pending refund to the processor of its payment and records the outcome: succeeded, failed
 * (with the processor's error) or manual_review. The refund is claimed while the processor answers,
 * with no transaction open; one cancelled meanwhile is left alone.
 */
export function refundJobHandlers(deps: RefundJobDependencies): Map<JobKind, LeasedJobHandler> {
  const { dataSource, clock } = deps;
  return new Map<JobKind, LeasedJobHandler>([
    [
      jobKinds.processRefund,
      {
        leaseMs,
        async run(job) {
          const claim = await deps.claims.claim(refundResource, job, job.objectId, (row) => refundStates.allows("process", row.status));
          if (claim === undefined) return undefined;
          const row = claim.row;
          return deps.claims.finish(refundResource, claim, async () => {
            const payment = await paymentsAtProcessor.read(dataSource.manager, row, row.paymentId);
            const result = await deps.processors.named(payment!.processor!).refund({
              idempotencyKey: `${row.merchantId}:${row.refundId}:refund`,
              reference: payment!.reference,
              amount: row.amount,
              currency: row.currency,
            });
            row.processorReference = result.reference;
            refundStates.move(row, "process", result.status === "declined" ? "failed" : result.status);
            if (result.status === "declined") {
              row.errorCode = result.errorCode;
              row.errorMessage = result.errorMessage;
            }
            row.updated = clock.now();
            return deps.writer.writeClaimed(refundResource, claim, "pending", []);
          });
        },
      },
    ],
  ]);
}
