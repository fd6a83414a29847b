import { Column, Entity, PrimaryColumn } from "typeorm";
import { bigintColumn } from "../db/bigint.js";
import type { AddressJson } from "../validation/address.js";

/** Payout statuses (interface §3, decisions §9), as stored; success, failed and cancelled are final. */
export type PayoutStatusWord = "pending" | "requires_fulfillment" | "success" | "failed" | "cancelled";

/** What responses show of a destination: never the full card or account number. */
export type MaskedDestination =
  | { card: { last4: string; exp_month: string; exp_year: string } }
  | { bank: { last4: string; bank_name?: string } };

/** One try at sending the payout through a processor; `pending` while the processor has not answered. */
export interface StoredAttempt {
  attempt_id: string;
  processor: string;
  status: "pending" | "success" | "failed";
  error_code?: string;
  error_message?: string;
  /** Whether another processor may succeed where this one failed. */
  retryable?: boolean;
  processor_reference?: string;
  created: string;
}

/** The recipient's billing details, keyed by the API's snake_case names. */
export interface StoredBilling {
  address?: AddressJson;
  phone?: string;
  email?: string;
}

/** Money sent out to a card or bank account. */
@Entity({ name: "payouts" })
export class PayoutRow {
  @PrimaryColumn({ name: "merchant_id", type: "varchar", length: 64 })
  merchantId!: string;

  @PrimaryColumn({ name: "livemode", type: "boolean" })
  livemode!: boolean;

  @PrimaryColumn({ name: "payout_id", type: "varchar", length: 64 })
  payoutId!: string;

  @Column({ name: "profile_id", type: "varchar", length: 64 })
  profileId!: string;

  @Column({ name: "customer_id", type: "varchar", length: 64, nullable: true })
  customerId!: string | null;

  @Column({ name: "status", type: "varchar", length: 32 })
  status!: PayoutStatusWord;

  @Column({ name: "amount", type: "bigint", transformer: bigintColumn })
  amount!: bigint;

  @Column({ name: "currency", type: "char", length: 3 })
  currency!: string;

  @Column({ name: "payout_type", type: "varchar", length: 16 })
  payoutType!: "card" | "bank";

  @Column({ name: "priority", type: "varchar", length: 16 })
  priority!: "instant" | "fast" | "regular" | "wire";

  @Column({ name: "email", type: "text", nullable: true })
  email!: string | null;

  @Column({ name: "name", type: "text", nullable: true })
  name!: string | null;

  @Column({ name: "phone", type: "text", nullable: true })
  phone!: string | null;

  @Column({ name: "destination", type: "jsonb" })
  destination!: MaskedDestination;

  /**
   * The full destination, encrypted with DATA_ENCRYPTION_KEY (src/secrets/data-cipher.ts), kept only
   * while the payout may still be sent: cleared when it reaches a final status.
   */
  @Column({ name: "destination_ciphertext", type: "text", nullable: true })
  destinationCiphertext!: string | null;

  @Column({ name: "billing", type: "jsonb", nullable: true })
  billing!: StoredBilling | null;

  /** The caller's preferred processor, tried first. */
  @Column({ name: "preferred_processor", type: "varchar", length: 64, nullable: true })
  preferredProcessor!: string | null;

  /** The processor handling the payout: the first choice until one is tried, then the last one tried. */
  @Column({ name: "processor", type: "varchar", length: 64, nullable: true })
  processor!: string | null;

  @Column({ name: "confirm", type: "boolean" })
  confirm!: boolean;

  @Column({ name: "error_code", type: "text", nullable: true })
  errorCode!: string | null;

  @Column({ name: "error_message", type: "text", nullable: true })
  errorMessage!: string | null;

  @Column({ name: "attempts", type: "jsonb" })
  attempts!: StoredAttempt[];

  @Column({ name: "metadata", type: "jsonb" })
  metadata!: Record<string, string>;

  @Column({ name: "created", type: "timestamptz" })
  created!: Date;

  @Column({ name: "updated", type: "timestamptz" })
  updated!: Date;
}
