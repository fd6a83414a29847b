import type { DataSource } from "typeorm";
import type { Clock } from "../../clock.js";
import { BatchedReads } from "../../db/batched-reads.js";
import type { JobRow } from "../../jobs/job.entity.js";
import type { ObjectClaims } from "../../objects/claims.js";
import type { ObjectWriter } from "../../objects/writer.js";
import type { ProcessorRegistry } from "../../processors/registry.js";
import { refundStates } from "../states.js";
import { refundResource } from "../store.js";

/*
 * Processing (job `refund.process`): a pending refund is sent to the processor of its payment and its
 * outcome recorded: succeeded, failed (with the processor's error) or manual_review. The refund was
 * recorded, pending with this job, before anyone asks the processor; the job, run again after a
 * crash, repeats the call under the refund's own key, which the processor answers with its first answer.
 */

/** What processing needs: the database, its claims and writer, and the processors (a refund goes to its payment's). */
export interface RefundProcessingDependencies {
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
 * Processes the job's refund, claimed while the processor answers, with no transaction open; one
 * cancelled meanwhile is left alone. "ended" when its outcome ended its pending jobs, this one with them.
 */
export async function processRefund(deps: RefundProcessingDependencies, job: JobRow): Promise<"ended" | undefined> {
  const { dataSource, clock } = deps;
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
}
