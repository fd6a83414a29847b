import type { DataSource } from "typeorm";
import type { Clock } from "../../clock.js";
import { ApiError } from "../../errors.js";
import { newId } from "../../ids.js";
import type { JobRow } from "../../jobs/job.entity.js";
import { writeLockedChange } from "../../objects/writer.js";
import type { PayoutDestination, PayoutProcessor, PayoutResult } from "../../processors/processor.js";
import type { ProcessorRegistry } from "../../processors/registry.js";
import type { DataCipher } from "../../secrets/data-cipher.js";
import { openDestination } from "../destination.js";
import type { PayoutRow, StoredAttempt } from "../payout.entity.js";
import { route } from "../routing.js";
import { payoutStates } from "../states.js";
import { lockPayout, payoutResource } from "../store.js";

/*
 * Sending (job `payout.send`): one attempt per eligible processor, in routing order, each recorded on
 * the payout's row before its rail is asked and its outcome after, each in a transaction of its own.
 */

/** What sending payouts needs: the database (it commits its own recovery points), time, the processors, the destination cipher. */
export interface PayoutSendingDependencies {
  readonly dataSource: DataSource;
  readonly clock: Clock;
  readonly processors: ProcessorRegistry;
  readonly dataCipher: DataCipher;
}

/** An attempt committed as pending, to be sent now. */
interface PlannedAttempt {
  readonly attemptId: string;
  readonly processor: PayoutProcessor;
  readonly payout: Pick<PayoutRow, "amount" | "currency">;
  readonly destination: PayoutDestination;
}

/** Ends a payout that no processor sent: failed, with the last processor's error. */
function failPayout(row: PayoutRow, errorCode: string, errorMessage: string, now: Date): void {
  payoutStates.move(row, "send", "failed");
  row.errorCode = errorCode;
  row.errorMessage = errorMessage;
  row.updated = now;
}

/**
 * Recovery point before the processor is called: the attempt to make, committed as pending. An
 * attempt still pending from an earlier run (the instance died before recording the answer) is sent
 * again under the same id, which the processor takes as its idempotency key, so it pays at most once.
 * Undefined when there is nothing to send: the payout is no longer pending, or every eligible
 * processor has failed (the payout is then failed here).
 */
async function planAttempt(deps: PayoutSendingDependencies, job: JobRow): Promise<PlannedAttempt | undefined> {
  return deps.dataSource.transaction(async (em) => {
    const row = await lockPayout(em, job, job.objectId);
    if (!payoutStates.allows("send", row.status)) return undefined;
    const now = deps.clock.now();
    let candidates: PayoutProcessor[];
    try {
      const processors = deps.processors.payoutRailsFor(row.livemode);
      candidates = route(processors, { ...row, preferred: row.preferredProcessor ?? undefined });
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      // The routing table changed since the payout was created and nothing can send it any more.
      failPayout(row, "no_eligible_processor", error.message, now);
      await writeLockedChange(em, deps.clock, payoutResource, row, "pending");
      return undefined;
    }
    let attempt = row.attempts.find((a) => a.status === "pending");
    if (attempt === undefined) {
      const tried = new Set(row.attempts.map((a) => a.processor));
      const next = candidates.find((p) => !tried.has(p.name));
      if (next === undefined) {
        const last = row.attempts.at(-1)!;
        failPayout(row, last.error_code ?? "payout_failed", last.error_message ?? "No processor could send the payout.", now);
        await writeLockedChange(em, deps.clock, payoutResource, row, "pending");
        return undefined;
      }
      attempt = { attempt_id: newId("att"), processor: next.name, status: "pending", created: now.toISOString() };
      row.attempts = [...row.attempts, attempt];
      row.processor = next.name;
      row.updated = now;
      await writeLockedChange(em, deps.clock, payoutResource, row, "pending");
    }
    const processor = candidates.find((p) => p.name === attempt.processor);
    if (processor === undefined) throw new Error(`payout processor ${attempt.processor} is no longer eligible`);
    return {
      attemptId: attempt.attempt_id,
      processor,
      payout: row,
      destination: openDestination(deps.dataCipher, row, row.destinationCiphertext!),
    };
  });
}

/**
 * Recovery point after the processor answered: the attempt's outcome and what it means for the
 * payout. Returns true when sending is over (the payout is final, or not pending any more).
 */
async function recordOutcome(deps: PayoutSendingDependencies, job: JobRow, attemptId: string, result: PayoutResult): Promise<boolean> {
  return deps.dataSource.transaction(async (em) => {
    const row = await lockPayout(em, job, job.objectId);
    if (!payoutStates.allows("send", row.status)) return true;
    // Another run (after a lease ran out) recorded it first; plan again from what it wrote.
    if (!row.attempts.some((a) => a.attempt_id === attemptId && a.status === "pending")) return false;
    const now = deps.clock.now();
    const outcome: Partial<StoredAttempt> =
      result.status === "succeeded"
        ? { status: "success", processor_reference: result.reference }
        : {
            status: "failed",
            processor_reference: result.reference,
            error_code: result.errorCode,
            error_message: result.errorMessage,
            retryable: result.retryable,
          };
    row.attempts = row.attempts.map((a) => (a.attempt_id === attemptId ? { ...a, ...outcome } : a));
    row.updated = now;
    if (result.status === "succeeded") {
      payoutStates.move(row, "send", "success");
      row.errorCode = null;
      row.errorMessage = null;
    } else if (!result.retryable) {
      failPayout(row, result.errorCode, result.errorMessage, now);
    }
    await writeLockedChange(em, deps.clock, payoutResource, row, "pending");
    return row.status !== "pending";
  });
}

/**
 * Sends a pending payout: one attempt per eligible processor, in routing order, until one succeeds,
 * one declines for good (closed account, declined card) or none is left; a retryable failure falls
 * over to the next processor. A processor that does not answer (throws) leaves the attempt pending
 * and the job is retried with backoff, re-sending the same attempt.
 */
export async function sendPayout(deps: PayoutSendingDependencies, job: JobRow): Promise<undefined> {
  for (;;) {
    const planned = await planAttempt(deps, job);
    if (planned === undefined) return;
    const result = await planned.processor.payout({
      idempotencyKey: planned.attemptId,
      amount: planned.payout.amount,
      currency: planned.payout.currency,
      destination: planned.destination,
    });
    if (await recordOutcome(deps, job, planned.attemptId, result)) return;
  }
}
