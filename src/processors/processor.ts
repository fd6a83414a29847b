/*
 * The processor interface (Hyperswitch calls it a connector): everything the service asks of a card
 * network or bank. The sandbox implements it in-process; a real processor would implement it over
 * its HTTP API. Every call carries an idempotency key, recorded before the call is made (record first,
 * docs/architecture.md), so a retried call never moves money twice and recovery can ask what a call
 * that lost its answer did.
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

/** One card network integration: takes payments and returns their money. */
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
    /** A merchant-initiated payment under a mandate: no cardholder is present to authenticate. */
    readonly offSession: boolean;
  }): Promise<AuthorizeResult>;

  /** Finishes an authorization that required authentication, with the cardholder's outcome. */
  completeAuthentication(request: {
    readonly idempotencyKey: string;
    readonly reference: string;
    readonly authenticated: boolean;
    readonly capture: boolean;
  }): Promise<AuthorizeResult>;

  /** Captures (part of) an authorization. */
  capture(request: {
    readonly idempotencyKey: string;
    readonly reference: string;
    readonly amount: bigint;
    readonly currency: string;
  }): Promise<StepResult>;

  /** Releases an authorization without capturing it. */
  void(request: { readonly idempotencyKey: string; readonly reference: string }): Promise<StepResult>;

  /** Returns captured money to the card. */
  refund(request: {
    readonly idempotencyKey: string;
    readonly reference: string;
    readonly amount: bigint;
    readonly currency: string;
  }): Promise<RefundResult>;

  /**
   * The first answer to the call `operation` made with `idempotencyKey`, for recovery after a crash
   * lost it; undefined when the processor never received that call. A key recalled unseen is refused
   * from then on (declined, `attempt_abandoned`), so a call that arrives late cannot move money after
   * recovery settled its attempt as never made. A real connector implements this with its processor's
   * lookup of a request by idempotency key, and a void of whatever a late call authorized.
   */
  recall<Operation extends keyof ProcessorAnswers>(
    operation: Operation,
    idempotencyKey: string,
  ): Promise<ProcessorAnswers[Operation] | undefined>;
}

/** What each call of a Processor answers, by the call's name: what `recall` gives back. */
export interface ProcessorAnswers {
  readonly authorize: AuthorizeResult;
  readonly completeAuthentication: AuthorizeResult;
  readonly capture: StepResult;
  readonly void: StepResult;
  readonly refund: RefundResult;
}

/** Outcome of a payout attempt. */
export type PayoutResult =
  | { readonly status: "succeeded"; readonly reference: string }
  /**
   * Not sent. `retryable`: the failure is the processor's own (an outage, a rail that is down), so
   * another processor may succeed; otherwise it is the destination's (closed account, declined card)
   * and no processor will.
   */
  | {
      readonly status: "declined";
      readonly reference: string;
      readonly errorCode: string;
      readonly errorMessage: string;
      readonly retryable: boolean;
    };

/** What a payout processor can send; routing (src/payouts/routing.ts) picks processors by it. */
export interface PayoutCapabilities {
  readonly payoutTypes: readonly ("card" | "bank")[];
  readonly priorities: readonly ("instant" | "fast" | "regular" | "wire")[];
  /** ISO 4217 codes; undefined: any currency. */
  readonly currencies: readonly string[] | undefined;
  /** Largest amount of one payout, in the smallest currency unit; undefined: no maximum. */
  readonly maxAmount: bigint | undefined;
}

/** One payout rail (a card push network, a bank transfer scheme): sends money out. */
export interface PayoutProcessor {
  /** Stable name: stored on payouts and attempts, and what a caller names as preferred processor. */
  readonly name: string;
  readonly capabilities: PayoutCapabilities;

  /** Like Processor.checkCard, for a destination card before the payout is stored. */
  checkCard(card: Omit<CardDetails, "cvc">, field: string): void;

  /**
   * Sends `amount` to the destination. The same idempotency key always gets the first call's outcome
   * and moves money at most once, so a call repeated after a crash cannot pay twice.
   */
  payout(request: {
    readonly idempotencyKey: string;
    readonly amount: bigint;
    readonly currency: string;
    readonly destination: PayoutDestination;
  }): Promise<PayoutResult>;
}
