import type { Clock } from "../clock.js";
import { invalidField } from "../errors.js";
import { hasExpired } from "./card.js";
import { randomBase62 } from "../ids.js";
import type { AuthorizeResult, CardDetails, Processor, ProcessorAnswers, RefundResult, StepResult } from "./processor.js";
import type { SandboxCallBooks } from "./sandbox-books.js";

/** How a sandbox test card behaves (decisions §3). */
export type TestCard =
  | { readonly outcome: "succeeds"; readonly disputeExpected?: true }
  /**
   * The issuer asks the cardholder to authenticate on-session; off-session, with no cardholder to ask,
   * it either exempts the payment (it succeeds) or declines it (`authentication_required`).
   */
  | { readonly outcome: "requires_authentication"; readonly offSession: "succeeds" | "declined" }
  | { readonly outcome: "declined"; readonly errorCode: string; readonly errorMessage: string };

const succeeds: TestCard = { outcome: "succeeds" };
const cardDeclined = { errorCode: "card_declined", errorMessage: "Your card was declined." } as const;

/** The test cards of decisions §3; the number alone decides the outcome, so no state is needed. */
const testCards: ReadonlyMap<string, TestCard> = new Map<string, TestCard>([
  ["4242424242424242", succeeds],
  ["4111111111111111", succeeds],
  ["5555555555554444", succeeds],
  ["378282246310005", succeeds],
  ["6011111111111117", succeeds],
  ["4000000000003220", { outcome: "requires_authentication", offSession: "succeeds" }],
  ["4000002760003184", { outcome: "requires_authentication", offSession: "declined" }],
  ["4000000000009995", { outcome: "declined", errorCode: "insufficient_funds", errorMessage: "Your card has insufficient funds." }],
  ["4000000000000002", { outcome: "declined", ...cardDeclined }],
  ["4000000000000259", { outcome: "succeeds", disputeExpected: true }],
]);

/**
 * How a sandbox card behaves. checkCard refuses unknown cards before anything is stored; should one
 * get through anyway, it is declined as a real processor would. Sandbox payout rails share the table.
 */
export function testCardFor(number: string): TestCard {
  return testCards.get(number) ?? { outcome: "declined", ...cardDeclined };
}

/** Refund amounts with a scripted outcome, the refund counterpart of the test cards. */
type ScriptedRefund = "manual_review" | { readonly errorCode: string; readonly errorMessage: string };
const scriptedRefunds: ReadonlyMap<bigint, ScriptedRefund> = new Map<bigint, ScriptedRefund>([
  [9995n, { errorCode: "refund_declined", errorMessage: "The card issuer declined the refund." }],
  [9996n, "manual_review"],
]);

/** Refuses a card the sandbox does not know, naming `<field>.card_number` (decisions §3). */
export function checkTestCard(number: string, field: string): void {
  if (!testCards.has(number)) throw invalidField(`${field}.card_number`, "card not supported in sandbox, use a test card");
}

/** Prefix of authorizations of the dispute test card 4000000000000259. */
const disputedPrefix = "sbx_dsp_";

/** References look like a real processor's: opaque and unique, so nothing can be inferred from them. */
export function newReference(): string {
  return `sbx_${randomBase62(24)}`;
}

/**
 * The built-in processor behind sandbox keys (decisions §3). Every outcome follows from the arguments,
 * and its books (sandbox-books.ts, in the database) answer a repeated idempotency key with the first
 * call's answer, on any instance, so any number of service instances behave alike.
 */
export class SandboxProcessor implements Processor {
  readonly name = "sandbox";

  constructor(
    private readonly books: SandboxCallBooks,
    private readonly clock: Clock,
  ) {}

  checkCard(card: Omit<CardDetails, "cvc">, field: string): void {
    checkTestCard(card.number, field);
  }

  authorize(request: {
    readonly idempotencyKey: string;
    readonly card: CardDetails;
    readonly capture: boolean;
    readonly offSession: boolean;
  }): Promise<AuthorizeResult> {
    return this.books.book("authorize", request.idempotencyKey, authorization(request, this.clock.now()));
  }

  completeAuthentication(request: {
    readonly idempotencyKey: string;
    readonly reference: string;
    readonly authenticated: boolean;
    readonly capture: boolean;
  }): Promise<AuthorizeResult> {
    const { reference } = request;
    const outcome: AuthorizeResult = request.authenticated
      ? { status: request.capture ? "captured" : "authorized", reference }
      : {
          status: "declined",
          reference,
          errorCode: "authentication_failed",
          errorMessage: "The cardholder failed 3D Secure authentication.",
        };
    return this.books.book("completeAuthentication", request.idempotencyKey, outcome);
  }

  capture(request: { readonly idempotencyKey: string; readonly reference: string }): Promise<StepResult> {
    const disputeExpected = request.reference.startsWith(disputedPrefix);
    return this.books.book("capture", request.idempotencyKey, { status: "succeeded", reference: newReference(), disputeExpected });
  }

  void(request: { readonly idempotencyKey: string }): Promise<StepResult> {
    return this.books.book("void", request.idempotencyKey, { status: "succeeded", reference: newReference() });
  }

  /** Refunds succeed, except the amounts scripted like test cards: 9995 fails, 9996 goes to manual review. */
  refund(request: { readonly idempotencyKey: string; readonly amount: bigint }): Promise<RefundResult> {
    const reference = newReference();
    const scripted = scriptedRefunds.get(request.amount);
    const outcome: RefundResult =
      scripted === "manual_review"
        ? { status: "manual_review", reference }
        : scripted === undefined
          ? { status: "succeeded", reference }
          : { status: "declined", reference, ...scripted };
    return this.books.book("refund", request.idempotencyKey, outcome);
  }

  recall<Operation extends keyof ProcessorAnswers>(
    _operation: Operation,
    idempotencyKey: string,
  ): Promise<ProcessorAnswers[Operation] | undefined> {
    return this.books.recall(idempotencyKey);
  }
}

/** What the issuer of a test card answers an authorization. */
function authorization(
  { card, capture, offSession }: { readonly card: CardDetails; readonly capture: boolean; readonly offSession: boolean },
  now: Date,
): AuthorizeResult {
  // A network declines a card past its expiry. A card sent with a request never gets here so (it is
  // refused first, IR_16); a saved one can, kept for years.
  if (hasExpired(card, now)) {
    return { status: "declined", reference: newReference(), errorCode: "expired_card", errorMessage: "The card has expired." };
  }
  const testCard = testCardFor(card.number);
  switch (testCard.outcome) {
    case "succeeds": {
      // The reference remembers a dispute card, so a later capture (on any instance) still knows.
      const reference = testCard.disputeExpected ? `${disputedPrefix}${randomBase62(24)}` : newReference();
      return { status: capture ? "captured" : "authorized", reference, disputeExpected: testCard.disputeExpected === true };
    }
    case "requires_authentication":
      if (!offSession) return { status: "requires_authentication", reference: newReference() };
      if (testCard.offSession === "succeeds") return { status: capture ? "captured" : "authorized", reference: newReference() };
      return {
        status: "declined",
        reference: newReference(),
        errorCode: "authentication_required",
        errorMessage: "The card's issuer requires the cardholder to authenticate, and an off-session payment cannot ask them.",
      };
    case "declined":
      return { status: "declined", reference: newReference(), errorCode: testCard.errorCode, errorMessage: testCard.errorMessage };
  }
}
