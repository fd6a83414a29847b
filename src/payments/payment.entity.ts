import { Column, Entity, PrimaryColumn } from "typeorm";
import { bigintColumn } from "../db/bigint.js";
import type { StoredMandateRequest } from "../mandates/mandate.entity.js";

/** What is stored of a card: enough to show and recognise it, never the number or CVC. */
export interface StoredCard {
  last4: string;
  brand: string;
  exp_month: string;
  exp_year: string;
}

/** The action a customer must take before the payment can proceed (3DS). */
export interface StoredNextAction {
  type: "redirect_to_url";
  redirect_to_url: string;
}

/**
 * A processor call a payment operation needs (payments/operations/): what making the call, again if
 * need be, and applying its answer need, except card details, which are never stored.
 */
export type AttemptCall = {
  /** The processor's idempotency key for this call, unique to the attempt. */
  readonly key: string;
  /** The processor asked (its name in the registry). */
  readonly processor: string;
} & (
  | {
      readonly call: "authorize";
      readonly capture: boolean;
      readonly card: StoredCard;
      /** Made under a mandate without the customer (absent on attempts recorded before mandates: false). */
      readonly offSession?: boolean;
      /** The single-use mandate the record took, which the outcome uses up or gives back. */
      readonly singleUseMandate?: string;
    }
  | { readonly call: "completeAuthentication"; readonly capture: boolean; readonly authenticated: boolean }
  | { readonly call: "capture"; readonly amount: string }
  | { readonly call: "void"; readonly operation: "cancel" | "expire"; readonly reason: string }
);

/**
 * An attempt as recorded on the payment before the call is made and cleared by the statement that
 * writes its outcome (record first, docs/architecture.md): a crash in between leaves it for recovery
 * to settle with the processor's answer to its idempotency `key`.
 */
export type StoredAttempt = AttemptCall & {
  /** The idempotency key of the API call that made the attempt: a retry of that call finishes it. */
  readonly requestKey: string | null;
};

/** Payment statuses of interface §3, as stored. */
export type PaymentStatusWord =
  | "requires_payment_method"
  | "requires_confirmation"
  | "requires_action"
  | "processing"
  | "requires_capture"
  | "succeeded"
  | "failed"
  | "cancelled";

/** What a payment saves its card for (decisions §10), as stored. */
export type SetupFutureUsageWord = "on_session" | "off_session";

/** Capture methods of interface §2, as stored. */
export type CaptureMethodWord = "automatic" | "manual" | "scheduled";

/** A payment. The composite key keeps merchants and environments apart, like every object. */
@Entity({ name: "payments" })
export class PaymentRow {
  @PrimaryColumn({ name: "merchant_id", type: "varchar", length: 64 })
  merchantId!: string;

  @PrimaryColumn({ name: "livemode", type: "boolean" })
  livemode!: boolean;

  @PrimaryColumn({ name: "payment_id", type: "varchar", length: 64 })
  paymentId!: string;

  @Column({ name: "profile_id", type: "varchar", length: 64 })
  profileId!: string;

  @Column({ name: "status", type: "varchar", length: 32 })
  status!: PaymentStatusWord;

  @Column({ name: "amount", type: "bigint", transformer: bigintColumn })
  amount!: bigint;

  @Column({ name: "currency", type: "char", length: 3 })
  currency!: string;

  @Column({ name: "amount_capturable", type: "bigint", transformer: bigintColumn })
  amountCapturable!: bigint;

  @Column({ name: "amount_received", type: "bigint", nullable: true, transformer: bigintColumn })
  amountReceived!: bigint | null;

  @Column({ name: "capture_method", type: "varchar", length: 16 })
  captureMethod!: CaptureMethodWord;

  @Column({ name: "capture_on", type: "timestamptz", nullable: true })
  captureOn!: Date | null;

  @Column({ name: "payment_method", type: "varchar", length: 32, nullable: true })
  paymentMethod!: string | null;

  @Column({ name: "payment_method_type", type: "varchar", length: 32, nullable: true })
  paymentMethodType!: string | null;

  @Column({ name: "card", type: "jsonb", nullable: true })
  card!: StoredCard | null;

  /** The saved payment method (payment-methods/) it is paid with, if one is. */
  @Column({ name: "payment_method_id", type: "varchar", length: 64, nullable: true })
  paymentMethodId!: string | null;

  @Column({ name: "customer_id", type: "varchar", length: 64, nullable: true })
  customerId!: string | null;

  /** What its card is saved for once it succeeds or is authorized (payments/future-usage.ts). */
  @Column({ name: "setup_future_usage", type: "varchar", length: 16, nullable: true })
  setupFutureUsage!: SetupFutureUsageWord | null;

  /** Merchant-initiated, under the mandate `mandateId`, without the customer present. */
  @Column({ name: "off_session", type: "boolean" })
  offSession!: boolean;

  /** The mandate an off-session setup creates once it succeeds, or an off-session payment is made under. */
  @Column({ name: "mandate_id", type: "varchar", length: 64, nullable: true })
  mandateId!: string | null;

  /** What an off-session setup asks its mandate to be, until its outcome writes the mandate. */
  @Column({ name: "mandate_request", type: "jsonb", nullable: true })
  mandateRequest!: StoredMandateRequest | null;

  @Column({ name: "email", type: "text", nullable: true })
  email!: string | null;

  @Column({ name: "description", type: "text", nullable: true })
  description!: string | null;

  @Column({ name: "statement_descriptor", type: "text", nullable: true })
  statementDescriptor!: string | null;

  @Column({ name: "return_url", type: "text", nullable: true })
  returnUrl!: string | null;

  @Column({ name: "client_secret", type: "text" })
  clientSecret!: string;

  @Column({ name: "next_action", type: "jsonb", nullable: true })
  nextAction!: StoredNextAction | null;

  @Column({ name: "error_code", type: "text", nullable: true })
  errorCode!: string | null;

  @Column({ name: "error_message", type: "text", nullable: true })
  errorMessage!: string | null;

  @Column({ name: "cancellation_reason", type: "text", nullable: true })
  cancellationReason!: string | null;

  @Column({ name: "metadata", type: "jsonb" })
  metadata!: Record<string, string>;

  /** Processor that holds the authorization, and its reference for capture/void/refund. */
  @Column({ name: "processor", type: "varchar", length: 32, nullable: true })
  processor!: string | null;

  @Column({ name: "processor_reference", type: "text", nullable: true })
  processorReference!: string | null;

  /** Unguessable token in the 3DS page URL; the page needs no API key, this authorizes it. */
  @Column({ name: "authentication_token", type: "varchar", length: 64, nullable: true })
  authenticationToken!: string | null;

  @Column({ name: "created", type: "timestamptz" })
  created!: Date;

  @Column({ name: "modified_at", type: "timestamptz" })
  modifiedAt!: Date;

  /** The operation holding this object while it waits for a processor (src/db/claims.ts), and until when. */
  @Column({ name: "claim_token", type: "varchar", length: 32, nullable: true })
  claimToken!: string | null;

  @Column({ name: "claimed_until", type: "timestamptz", nullable: true })
  claimedUntil!: Date | null;

  /** The instance holding the claim (src/db/liveness.ts): a claim whose instance is gone has lapsed. */
  @Column({ name: "claimed_by", type: "integer", nullable: true })
  claimedBy!: number | null;

  /** The processor call under way or left unsettled by a crash; null between calls. */
  @Column({ name: "attempt", type: "jsonb", nullable: true })
  attempt!: StoredAttempt | null;
}
