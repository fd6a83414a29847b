import type { App } from "../app.js";
import type { NewJob } from "../jobs/runner.js";
import { disputeJobs } from "../disputes/store.js";
import { randomBase62 } from "../ids.js";
import type { AuthorizeResult } from "../processors/processor.js";
import type { PaymentRow } from "./payment.entity.js";
import { authorizationValidityMs } from "./rules.js";

/** Path prefix of the pages a customer's browser is sent to for 3D Secure. */
export const authenticationPath = "/3ds/";

/** Job kinds of payments, run by the job runner. */
export const paymentJobs = {
  captureScheduled: "payment.capture_scheduled",
  expireAuthorization: "payment.expire_authorization",
} as const;

/**
 * Applies a processor's answer to a payment being confirmed (or authenticated): the status it
 * enters, the amounts, the 3DS redirect, the error. Returns the jobs the new status needs.
 */
export function applyAuthorization(app: App, row: PaymentRow, result: AuthorizeResult, processor: string): NewJob[] {
  const now = app.clock.now();
  row.processor = processor;
  row.processorReference = result.reference;
  row.nextAction = null;
  row.authenticationToken = null;
  row.modifiedAt = now;
  const job = (kind: string, runAt: Date): NewJob => ({
    kind,
    merchantId: row.merchantId,
    livemode: row.livemode,
    objectId: row.paymentId,
    runAt,
  });
  switch (result.status) {
    case "captured":
      row.status = "succeeded";
      row.amountReceived = row.amount;
      row.amountCapturable = 0n;
      return result.disputeExpected === true ? [reportedDisputeJob(row, now)] : [];
    case "authorized": {
      row.status = "requires_capture";
      row.amountCapturable = row.amount;
      const jobs = [job(paymentJobs.expireAuthorization, new Date(now.getTime() + authorizationValidityMs))];
      if (row.captureMethod === "scheduled" && row.captureOn !== null) {
        jobs.push(job(paymentJobs.captureScheduled, row.captureOn));
      }
      return jobs;
    }
    case "requires_authentication": {
      row.status = "requires_action";
      row.authenticationToken = randomBase62(40);
      row.nextAction = {
        type: "redirect_to_url",
        redirect_to_url: `${app.publicBaseUrl}${authenticationPath}${row.authenticationToken}`,
      };
      return [];
    }
    case "declined":
      row.status = "failed";
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
export function reportedDisputeJob(row: PaymentRow, now: Date): NewJob {
  return { kind: disputeJobs.openReported, merchantId: row.merchantId, livemode: row.livemode, objectId: row.paymentId, runAt: now };
}

/**
 * Whether the processor should capture at once: automatic capture, or a scheduled capture whose
 * time has already come.
 */
export function capturesOnAuthorization(row: PaymentRow, now: Date): boolean {
  return row.captureMethod === "automatic" || (row.captureMethod === "scheduled" && row.captureOn !== null && row.captureOn <= now);
}
