/*
 * The processor interface (Hyperswitch calls it a connector): everything the service asks of a card
 * network or bank. The sandbox implements it in-process; a real processor would implement it over
 * its HTTP API. Calls carry our ids as idempotency keys so a retried call never moves money twice.
 */

/** Card details as the processor receives them: the only place a full card number travels. */
export interface CardDetails {
  readonly number: string;
  readonly expMonth: number;
  /** Four-digit year. */
  readonly expYear: number;
  readonly cvc: string;
  readonly holderName: string | undefined;
}

/** Outcome of an authorization attempt. */
export type AuthorizeResult =
  /** Funds are held (capture false) or already captured (capture true). */
  | {
      readonly status: "authorized" | "captured";
      readonly reference: string;
      /** The processor will report a dispute once this money is captured (sandbox card 4000000000000259). */
      readonly disputeExpected?: boolean;
    }
  /** The issuer wants the cardholder to authenticate (3DS) before deciding. */
  | { readonly status: "requires_authentication"; readonly reference: string }
  /** Declined: not an API error, the payment fails with these details. */
  | { readonly status: "declined"; readonly reference: string; readonly errorCode: string; readonly errorMessage: string };

/** Outcome of a step that either goes through or is declined. */
export type StepResult =
  /** disputeExpected (captures only): the processor will report a dispute on this money. */
  | { readonly status: "succeeded"; readonly reference: string; readonly disputeExpected?: boolean }
  | { readonly status: "declined"; readonly reference: string; readonly errorCode: string; readonly errorMessage: string };

/** Outcome of a refund: processors may also hold one for a manual review by their staff. */
export type RefundResult = StepResult | { readonly status: "manual_review"; readonly reference: string };

/** A payout destination as the processor receives it. */
export type PayoutDestination =
  | { readonly type: "card"; readonly card: Omit<CardDetails, "cvc"> }
  | {
      readonly type: "bank";
      readonly bankName: string;
      readonly accountNumber: string;
      readonly routingNumber: string;
      readonly holderName: string;
    };

/** One card network / bank integration. */
export interface Processor {
  /** Stable name stored on objects, e.g. "sandbox". */
  readonly name: string;

  /**
   * Checks that this processor accepts the card at all, before anything is stored; throws an
   * ApiError naming `<field>.card_number` otherwise (e.g. a sandbox that only knows its test cards).
   * No CVC is needed, so payout cards can be checked too.
   */
  checkCard(card: Omit<CardDetails, "cvc">, field: string): void;

  /** Authorizes `amount` on the card, capturing at once when `capture` is true. */
  authorize(request: {
    readonly idempotencyKey: string;
    readonly amount: bigint;
    readonly currency: string;
    readonly card: CardDetails;
    readonly capture: boolean;
  }): Promise<AuthorizeResult>;

  /** Finishes an authorization that required authentication, with the cardholder's outcome. */
  completeAuthentication(request: {
    readonly reference: string;
    readonly authenticated: boolean;
    readonly capture: boolean;
  }): Promise<AuthorizeResult>;

  /** Captures (part of) an authorization. */
  capture(request: { readonly reference: string; readonly amount: bigint; readonly currency: string }): Promise<StepResult>;

  /** Releases an authorization without capturing it. */
  void(request: { readonly reference: string }): Promise<StepResult>;

  /** Returns captured money to the card. */
  refund(request: {
    readonly idempotencyKey: string;
    readonly reference: string;
    readonly amount: bigint;
    readonly currency: string;
  }): Promise<RefundResult>;

  /** Sends money to a card or bank account. */
  payout(request: {
    readonly idempotencyKey: string;
    readonly amount: bigint;
    readonly currency: string;
    readonly destination: PayoutDestination;
  }): Promise<StepResult>;
}
