import type { Clock } from "../clock.js";
import { randomBase62 } from "../ids.js";
import { jobKinds } from "../jobs/kinds.js";
import { jobFor, type NewJob } from "../jobs/runner.js";
import type { AuthorizeResult, CardDetails, ProcessorAnswers, StepResult } from "../processors/processor.js";
import type { ProcessorRegistry } from "../processors/registry.js";
import type { PaymentRow, StoredAttempt } from "./payment.entity.js";
import { authorizationValidityMs, paymentStates } from "./states.js";

/*
 * A payment's processor calls as attempts (record first, operation.ts): each operation
 * (operations/) says which call it needs as an attempt, with a processor idempotency key of its own;
 * here the call is made, or recalled from the processor after a crash, and its answer — or the
 * processor's word that it never received the call — gives the payment its new status and the jobs
 * that status needs.
 */

/** What the moves need: time, the processors, and the base of the URLs handed to browsers. */
export interface PaymentMoveDependencies {
  readonly clock: Clock;
  readonly processors: ProcessorRegistry;
  readonly publicBaseUrl: string;
}

/** Path prefix of the pages a customer's browser is sent to for 3D Secure. */
export const authenticationPath = "/3ds/";

/** The answer of an attempt's call. */
export type AttemptAnswer = ProcessorAnswers[StoredAttempt["call"]];

/** A processor idempotency key of its own for each attempt: a new attempt after one that never reached the processor is a new call. */
export function attemptKey(row: PaymentRow, call: StoredAttempt["call"]): string {
  return `${row.merchantId}:${row.paymentId}:${call}:${randomBase62(12)}`;
}

/** Makes the attempt's call with its own idempotency key; an authorization needs the card, which only the API call that sent it has. */
export function callAttempt(
  processors: ProcessorRegistry,
  row: PaymentRow,
  attempt: StoredAttempt,
  card: CardDetails | undefined,
): Promise<AttemptAnswer> {
  const processor = processors.named(attempt.processor);
  const idempotencyKey = attempt.key;
  switch (attempt.call) {
    case "authorize":
      if (card === undefined) throw new Error(`payment ${row.paymentId}: an authorization is made again only with its card`);
      return processor.authorize({
        idempotencyKey,
        amount: row.amount,
        currency: row.currency,
        card,
        capture: attempt.capture,
        offSession: attempt.offSession === true,
      });
    case "completeAuthentication":
      return processor.completeAuthentication({
        idempotencyKey,
        reference: row.processorReference!,
        authenticated: attempt.authenticated,
        capture: attempt.capture,
      });
    case "capture":
      return processor.capture({
        idempotencyKey,
        reference: row.processorReference!,
        amount: BigInt(attempt.amount),
        currency: row.currency,
      });
    case "void":
      return processor.void({ idempotencyKey, reference: row.processorReference! });
  }
}

/** The processor's first answer to the attempt's call, or undefined when it never received it (and now never will). */
export function recallAttempt(processors: ProcessorRegistry, attempt: StoredAttempt): Promise<AttemptAnswer | undefined> {
  return processors.named(attempt.processor).recall(attempt.call, attempt.key);
}

/**
 * Applies the answer to an attempt (undefined: the processor never received the call) and clears the
 * attempt: the payment's new status and the jobs that status needs.
 */
export function applyAttempt(
  deps: PaymentMoveDependencies,
  row: PaymentRow,
  attempt: StoredAttempt,
  answer: AttemptAnswer | undefined,
): NewJob[] {
  row.attempt = null;
  row.modifiedAt = deps.clock.now();
  if (answer === undefined) {
    // Nothing happened at the processor: the payment is as before the attempt, and one created to be
    // confirmed at once waits for a payment method, saying why, as after a declined card.
    if (row.status === "processing") {
      paymentStates.move(row, "settle", "requires_payment_method");
      row.errorCode = "processing_error";
      row.errorMessage = "The processor never received the authorization; confirm the payment again.";
    }
    return [];
  }
  switch (attempt.call) {
    case "authorize":
      row.card = attempt.card;
      row.paymentMethod = "card";
      return applyAuthorization(
        deps,
        row,
        row.status === "processing" ? "settle" : "confirm",
        answer as AuthorizeResult,
        attempt.processor,
      );
    case "completeAuthentication":
      return applyAuthorization(deps, row, "authenticate", answer as AuthorizeResult, attempt.processor);
    case "capture":
      return applyCapture(row, BigInt(attempt.amount), answer as StepResult);
    case "void":
      applyCancel(deps, row, attempt.operation, attempt.reason);
      return [];
  }
}

/** A capture's answer: succeeded with amount_received, or failed if the processor refused. */
function applyCapture(row: PaymentRow, amount: bigint, result: StepResult): NewJob[] {
  row.amountCapturable = 0n;
  if (result.status === "declined") {
    paymentStates.move(row, "capture", "failed");
    row.errorCode = result.errorCode;
    row.errorMessage = result.errorMessage;
    return [];
  }
  paymentStates.move(row, "capture", "succeeded");
  row.amountReceived = amount;
  return result.disputeExpected === true ? [reportedDisputeJob(row, row.modifiedAt)] : [];
}

/** A cancelled payment needs no jobs. */
export function applyCancel(deps: PaymentMoveDependencies, row: PaymentRow, operation: "cancel" | "expire", reason: string): void {
  paymentStates.move(row, operation, "cancelled");
  row.cancellationReason = reason;
  row.amountCapturable = 0n;
  row.nextAction = null;
  row.authenticationToken = null;
  row.modifiedAt = deps.clock.now();
}

/**
 * Applies a processor's answer to a payment being confirmed or authenticated: the status it enters,
 * the amounts, the 3DS redirect, the error.
 */
function applyAuthorization(
  deps: PaymentMoveDependencies,
  row: PaymentRow,
  operation: "confirm" | "settle" | "authenticate",
  result: AuthorizeResult,
  processor: string,
): NewJob[] {
  const now = deps.clock.now();
  row.processor = processor;
  row.processorReference = result.reference;
  row.errorCode = null;
  row.errorMessage = null;
  row.nextAction = null;
  row.authenticationToken = null;
  row.modifiedAt = now;
  switch (result.status) {
    case "captured":
      paymentStates.move(row, operation, "succeeded");
      row.amountReceived = row.amount;
      row.amountCapturable = 0n;
      return result.disputeExpected === true ? [reportedDisputeJob(row, now)] : [];
    case "authorized": {
      paymentStates.move(row, operation, "requires_capture");
      row.amountCapturable = row.amount;
      const jobs = [jobFor(jobKinds.expireAuthorization, row, row.paymentId, new Date(now.getTime() + authorizationValidityMs))];
      if (row.captureMethod === "scheduled" && row.captureOn !== null)
        jobs.push(jobFor(jobKinds.capturePayment, row, row.paymentId, row.captureOn));
      return jobs;
    }
    case "requires_authentication":
      paymentStates.move(row, operation, "requires_action");
      row.authenticationToken = randomBase62(40);
      row.nextAction = { type: "redirect_to_url", redirect_to_url: `${deps.publicBaseUrl}${authenticationPath}${row.authenticationToken}` };
      return [];
    case "declined":
      paymentStates.move(row, operation, "failed");
      row.amountCapturable = 0n;
      row.errorCode = result.errorCode;
      row.errorMessage = result.errorMessage;
      return [];
  }
}

/**
 * The processor said a dispute will follow once the money is captured (sandbox card
 * 4000000000000259): a job, due at once, opens it as the network's report would.
 */
function reportedDisputeJob(row: PaymentRow, now: Date): NewJob {
  return jobFor(jobKinds.openReportedDispute, row, row.paymentId, now);
}

/** Whether the processor should capture at once: automatic capture, or a scheduled capture whose time has come. */
export function capturesOnAuthorization(row: PaymentRow, now: Date): boolean {
  return row.captureMethod === "automatic" || (row.captureMethod === "scheduled" && row.captureOn !== null && row.captureOn <= now);
}
