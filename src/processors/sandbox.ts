import { invalidField } from "../errors.js";
import { randomBase62 } from "../ids.js";
import type { AuthorizeResult, CardDetails, Processor, RefundResult, StepResult } from "./processor.js";

/** How a sandbox test card behaves (decisions §3). */
export type TestCard =
  | { readonly outcome: "succeeds"; readonly disputeExpected?: true }
  | { readonly outcome: "requires_authentication" }
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
  ["4000000000003220", { outcome: "requires_authentication" }],
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
 * The built-in processor behind sandbox keys (decisions §3). It holds no state: every outcome
 * follows from the arguments, so any number of service instances behave alike.
 */
export class SandboxProcessor implements Processor {
  readonly name = "sandbox";

  checkCard(card: Omit<CardDetails, "cvc">, field: string): void {
    checkTestCard(card.number, field);
  }

  async authorize(request: { readonly card: CardDetails; readonly capture: boolean }): Promise<AuthorizeResult> {
    const testCard = testCardFor(request.card.number);
    switch (testCard.outcome) {
      case "succeeds": {
        // The reference remembers a dispute card, so a later capture (on any instance) still knows.
        const reference = testCard.disputeExpected ? `${disputedPrefix}${randomBase62(24)}` : newReference();
        return { status: request.capture ? "captured" : "authorized", reference, disputeExpected: testCard.disputeExpected === true };
      }
      case "requires_authentication":
        return { status: "requires_authentication", reference: newReference() };
      case "declined":
        return { status: "declined", reference: newReference(), errorCode: testCard.errorCode, errorMessage: testCard.errorMessage };
    }
  }

  async completeAuthentication(request: {
    readonly reference: string;
    readonly authenticated: boolean;
    readonly capture: boolean;
  }): Promise<AuthorizeResult> {
    const { reference } = request;
    if (!request.authenticated) {
      return {
        status: "declined",
        reference,
        errorCode: "authentication_failed",
        errorMessage: "The cardholder failed 3D Secure authentication.",
      };
    }
    return { status: request.capture ? "captured" : "authorized", reference };
  }

  async capture(request: { readonly reference: string }): Promise<StepResult> {
    return { status: "succeeded", reference: newReference(), disputeExpected: request.reference.startsWith(disputedPrefix) };
  }

  async void(): Promise<StepResult> {
    return { status: "succeeded", reference: newReference() };
  }

  /** Refunds succeed, except the amounts scripted like test cards: 9995 fails, 9996 goes to manual review. */
  async refund(request: { readonly amount: bigint }): Promise<RefundResult> {
    const reference = newReference();
    const scripted = scriptedRefunds.get(request.amount);
    if (scripted === "manual_review") return { status: "manual_review", reference };
    if (scripted !== undefined) return { status: "declined", reference, ...scripted };
    return { status: "succeeded", reference };
  }
}
