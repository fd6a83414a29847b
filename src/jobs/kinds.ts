/**
 * Every kind of job the runner knows, in one table: a resource schedules jobs that another resource
 * handles (a captured payment schedules the opening of its reported dispute), so the kinds sit here
 * rather than with either. A kind starts with its object's resource name and a dot: an object that
 * reaches a final status ends its pending jobs by that prefix.
 */
export const jobKinds = {
  /** A scheduled-capture payment is captured at capture_on. */
  capturePayment: "payment.capture_scheduled",
  /** A manual-capture authorization ends after 7 days. */
  expireAuthorization: "payment.expire_authorization",
  /** A pending refund is sent to its payment's processor. */
  processRefund: "refund.process",
  /** A pending payout is sent through its processors. */
  sendPayout: "payout.send",
  /** The sandbox network reports the dispute of a payment made with card 4000000000000259. */
  openReportedDispute: "dispute.open_reported",
  /** An opened dispute without evidence by evidence_due_by expires (counts as lost). */
  expireDispute: "dispute.expire",
} as const;

/** A kind of job. */
export type JobKind = (typeof jobKinds)[keyof typeof jobKinds];
