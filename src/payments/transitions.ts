import type { Clock } from "../clock.js";
import { randomBase62 } from "../ids.js";
import { jobKinds } from "../jobs/kinds.js";
import { jobFor, type NewJob } from "../jobs/runner.js";
import { cardView } from "../processors/card.js";
import type { AuthorizeResult, CardDetails, Processor } from "../processors/processor.js";
import type { ProcessorRegistry } from "../processors/registry.js";
import type { PaymentRow } from "./payment.entity.js";
import { authorizationValidityMs, paymentStates } from "./states.js";

/*
 * The moves of a payment that involve its processor, shared by the API, the job runner and the 3DS
 * page: each guards the payment's status, asks the processor, and applies the answer to the row
 * (which the caller has claimed, src/db/claims.ts, and then writes). Each returns the jobs its new
 * status needs.
 */

/** What the moves need: time, the processors, and the base of the URLs handed to browsers. */
export interface PaymentMoveDependencies {
  readonly clock: Clock;
  readonly processors: ProcessorRegistry;
  readonly publicBaseUrl: string;
}

/** Path prefix of the pages a customer's browser is sent to for 3D Secure. */
export const authenticationPath = "/3ds/";

/** Authorizes the card for the payment at `processor` (the one its environment gets), capturing at once unless manual. */
export async function confirm(deps: PaymentMoveDependencies, row: PaymentRow, processor: Processor, card: CardDetails): Promise<NewJob[]> {
  paymentStates.guard("confirm", row.status);
  const result = await processor.authorize({
    idempotencyKey: `${row.merchantId}:${row.paymentId}:authorize`,
    amount: row.amount,
    currency: row.currency,
    card,
    capture: capturesOnAuthorization(row, deps.clock.now()),
  });
  const view = cardView(card);
  row.card = { last4: view.last4, brand: view.brand, exp_month: view.expMonth, exp_year: view.expYear };
  row.paymentMethod = "card";
  return applyAuthorization(deps, row, "confirm", result, processor.name);
}

/** Finishes a 3D Secure authentication with the cardholder's outcome. */
export async function authenticate(deps: PaymentMoveDependencies, row: PaymentRow, authenticated: boolean): Promise<NewJob[]> {
  paymentStates.guard("authenticate", row.status);
  const processor = deps.processors.ofPayment(row);
  const result = await processor.completeAuthentication({
    idempotencyKey: `${row.merchantId}:${row.paymentId}:authenticate`,
    reference: row.processorReference!,
    authenticated,
    capture: capturesOnAuthorization(row, deps.clock.now()),
  });
  return applyAuthorization(deps, row, "authenticate", result, processor.name);
}

/** Captures `amount` of an authorized payment: succeeded with amount_received, or failed if the processor refuses. */
export async function capture(deps: PaymentMoveDependencies, row: PaymentRow, amount: bigint): Promise<NewJob[]> {
  paymentStates.guard("capture", row.status);
  const result = await deps.processors.ofPayment(row).capture({
    idempotencyKey: `${row.merchantId}:${row.paymentId}:capture`,
    reference: row.processorReference!,
    amount,
    currency: row.currency,
  });
  row.modifiedAt = deps.clock.now();
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

/**
 * Cancels a payment (`cancel`, at the merchant's request) or ends an authorization nobody captured
 * (`expire`), releasing what the processor holds. A cancelled payment needs no jobs.
 */
export async function cancel(
  deps: PaymentMoveDependencies,
  row: PaymentRow,
  operation: "cancel" | "expire",
  reason: string,
): Promise<NewJob[]> {
  paymentStates.guard(operation, row.status);
  if (row.status === "requires_capture" && row.processorReference !== null) {
    await deps.processors
      .ofPayment(row)
      .void({ idempotencyKey: `${row.merchantId}:${row.paymentId}:void`, reference: row.processorReference });
  }
  paymentStates.move(row, operation, "cancelled");
  row.cancellationReason = reason;
  row.amountCapturable = 0n;
  row.nextAction = null;
  row.authenticationToken = null;
  row.modifiedAt = deps.clock.now();
  return [];
}

/** Gives back what the processor holds or took for a payment that could not be recorded. */
export async function releaseFunds(processor: Processor, row: PaymentRow): Promise<void> {
  const reference = row.processorReference!;
  if (row.status === "requires_capture") await processor.void({ idempotencyKey: `${row.merchantId}:${row.paymentId}:release`, reference });
  if (row.status === "succeeded") {
    await processor.refund({
      idempotencyKey: `${row.merchantId}:${row.paymentId}:release`,
      reference,
      amount: row.amount,
      currency: row.currency,
    });
  }
}

/**
 * Applies a processor's answer to a payment being confirmed or authenticated: the status it enters,
 * the amounts, the 3DS redirect, the error.
 */
function applyAuthorization(
  deps: PaymentMoveDependencies,
  row: PaymentRow,
  operation: "confirm" | "authenticate",
  result: AuthorizeResult,
  processor: string,
): NewJob[] {
  const now = deps.clock.now();
  row.processor = processor;
  row.processorReference = result.reference;
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
function capturesOnAuthorization(row: PaymentRow, now: Date): boolean {
  return row.captureMethod === "automatic" || (row.captureMethod === "scheduled" && row.captureOn !== null && row.captureOn <= now);
}
