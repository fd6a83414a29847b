import { setTimeout as sleep } from "node:timers/promises";
import type { DataSource } from "typeorm";
import type { CardDetails, PayoutCapabilities, PayoutDestination, PayoutProcessor, PayoutResult } from "./processor.js";
import { checkTestCard, newReference, testCardFor } from "./sandbox.js";

/** A scripted failure of a sandbox destination. */
interface ScriptedFailure {
  readonly errorCode: string;
  readonly errorMessage: string;
  readonly retryable: boolean;
  /** Rails that fail this way; undefined: every rail. */
  readonly rails?: readonly string[];
}

const unavailable = {
  errorCode: "processor_unavailable",
  errorMessage: "The payout processor is temporarily unavailable.",
  retryable: true,
};

/** Bank accounts with a scripted outcome (decisions §3 and docs/payouts.md); every other account succeeds. */
const scriptedAccounts: ReadonlyMap<string, ScriptedFailure> = new Map<string, ScriptedFailure>([
  ["000111111116", { errorCode: "account_closed", errorMessage: "The bank account is closed.", retryable: false }],
  ["000222222227", { ...unavailable, rails: ["sandbox_ach"] }],
  ["000333333335", unavailable],
]);

/** Payout-only test cards, beside the payment test cards (a payout to 4242… succeeds, to …0002 is declined). */
const scriptedCards: ReadonlyMap<string, ScriptedFailure> = new Map<string, ScriptedFailure>([
  [
    "4000000000000119",
    {
      errorCode: "processing_error",
      errorMessage: "The card network could not process the payout.",
      retryable: true,
      rails: ["sandbox_instant"],
    },
  ],
]);

/** The account whose bank takes this long to answer (after it has moved the money): for timeout and restart tests. */
const slowAccount = "000999999991";
const slowAnswerMs = 2000;

function scriptedFailure(rail: string, destination: PayoutDestination): ScriptedFailure | undefined {
  const failure =
    destination.type === "bank" ? scriptedAccounts.get(destination.accountNumber) : scriptedCards.get(destination.card.number);
  if (failure !== undefined) return failure.rails === undefined || failure.rails.includes(rail) ? failure : undefined;
  if (destination.type === "card") {
    const testCard = testCardFor(destination.card.number);
    if (testCard.outcome === "declined") return { errorCode: testCard.errorCode, errorMessage: testCard.errorMessage, retryable: false };
  }
  return undefined;
}

/**
 * The books of the simulated banks and card networks: every payout request they accepted, by rail
 * and idempotency key. It lives in the service's database only because the sandbox has nowhere
 * else to keep it; each request commits on its own, as an external system would, whatever happens
 * to the caller's transaction afterwards.
 */
class SandboxPayoutBooks {
  constructor(private readonly dataSource: DataSource) {}

  /** Records `outcome` for the key unless a request with that key came first; returns the first one. */
  async settle(
    rail: string,
    request: {
      readonly idempotencyKey: string;
      readonly amount: bigint;
      readonly currency: string;
      readonly destination: PayoutDestination;
    },
    outcome: PayoutResult,
  ): Promise<{ readonly result: PayoutResult; readonly first: boolean }> {
    const last4 =
      request.destination.type === "bank" ? request.destination.accountNumber.slice(-4) : request.destination.card.number.slice(-4);
    const inserted = (await this.dataSource.query(
      `INSERT INTO sandbox_payout_transfers (rail, idempotency_key, amount, currency, destination_last4, outcome, created)
       VALUES ($1, $2, $3, $4, $5, $6, now()) ON CONFLICT (rail, idempotency_key) DO NOTHING RETURNING outcome`,
      [rail, request.idempotencyKey, request.amount.toString(), request.currency, last4, JSON.stringify(outcome)],
    )) as { outcome: PayoutResult }[];
    if (inserted.length === 1) return { result: outcome, first: true };
    const [existing] = (await this.dataSource.query(
      `SELECT outcome FROM sandbox_payout_transfers WHERE rail = $1 AND idempotency_key = $2`,
      [rail, request.idempotencyKey],
    )) as { outcome: PayoutResult }[];
    return { result: existing!.outcome, first: false };
  }
}

/**
 * A sandbox payout rail. Outcomes follow from the destination alone (decisions §3 plus the scripted
 * destinations of docs/payouts.md); the books make a repeated idempotency key answer as the first
 * call did without paying again, on any instance.
 */
class SandboxPayoutRail implements PayoutProcessor {
  constructor(
    readonly name: string,
    readonly capabilities: PayoutCapabilities,
    private readonly books: SandboxPayoutBooks,
  ) {}

  checkCard(card: Omit<CardDetails, "cvc">, field: string): void {
    if (!scriptedCards.has(card.number)) checkTestCard(card.number, field);
  }

  async payout(request: {
    readonly idempotencyKey: string;
    readonly amount: bigint;
    readonly currency: string;
    readonly destination: PayoutDestination;
  }): Promise<PayoutResult> {
    const failure = scriptedFailure(this.name, request.destination);
    const outcome: PayoutResult =
      failure === undefined
        ? { status: "succeeded", reference: newReference() }
        : {
            status: "declined",
            reference: newReference(),
            errorCode: failure.errorCode,
            errorMessage: failure.errorMessage,
            retryable: failure.retryable,
          };
    const { result, first } = await this.books.settle(this.name, request, outcome);
    if (first && request.destination.type === "bank" && request.destination.accountNumber === slowAccount) await sleep(slowAnswerMs);
    return result;
  }
}

/**
 * The sandbox's payout rails, in routing order (docs/payouts.md): an instant card push rail with a
 * per-payout maximum, a standard card rail, a domestic bank rail (USD) and an international bank
 * rail that also sends wires.
 */
export function sandboxPayoutRails(dataSource: DataSource): readonly PayoutProcessor[] {
  const books = new SandboxPayoutBooks(dataSource);
  return [
    new SandboxPayoutRail(
      "sandbox_instant",
      { payoutTypes: ["card"], priorities: ["instant", "fast"], currencies: ["USD", "EUR", "GBP", "CAD", "AUD"], maxAmount: 500_000n },
      books,
    ),
    new SandboxPayoutRail(
      "sandbox_card",
      { payoutTypes: ["card"], priorities: ["fast", "regular"], currencies: undefined, maxAmount: undefined },
      books,
    ),
    new SandboxPayoutRail(
      "sandbox_ach",
      { payoutTypes: ["bank"], priorities: ["fast", "regular"], currencies: ["USD"], maxAmount: undefined },
      books,
    ),
    new SandboxPayoutRail(
      "sandbox_swift",
      { payoutTypes: ["bank"], priorities: ["fast", "regular", "wire"], currencies: undefined, maxAmount: undefined },
      books,
    ),
  ];
}
