import { Column, Entity, PrimaryColumn } from "typeorm";
import { bigintColumn } from "../db/bigint.js";

/** Mandate statuses of decisions §10, as stored. */
export type MandateStatusWord = "active" | "revoked" | "inactive";

/** Mandate types of decisions §10, as stored. */
export type MandateTypeWord = "multi_use" | "single_use";

/** The customer's acceptance as the mandate keeps it (the API's JSON names). */
export interface StoredAcceptance {
  acceptance_type: "online" | "offline";
  accepted_at: string;
  online: { ip_address: string; user_agent: string } | null;
}

/** A customer's consent that the merchant may charge a saved card while the customer is away. */
@Entity({ name: "mandates" })
export class MandateRow {
  @PrimaryColumn({ name: "merchant_id", type: "varchar", length: 64 })
  merchantId!: string;

  @PrimaryColumn({ name: "livemode", type: "boolean" })
  livemode!: boolean;

  @PrimaryColumn({ name: "mandate_id", type: "varchar", length: 64 })
  mandateId!: string;

  /** The profile of the setup payment that made it, whose webhook_url receives its events. */
  @Column({ name: "profile_id", type: "varchar", length: 64 })
  profileId!: string;

  @Column({ name: "customer_id", type: "varchar", length: 64 })
  customerId!: string;

  @Column({ name: "payment_method_id", type: "varchar", length: 64 })
  paymentMethodId!: string;

  @Column({ name: "status", type: "varchar", length: 16 })
  status!: MandateStatusWord;

  @Column({ name: "type", type: "varchar", length: 16 })
  type!: MandateTypeWord;

  @Column({ name: "amount_limit", type: "bigint", nullable: true, transformer: bigintColumn })
  amountLimit!: bigint | null;

  @Column({ name: "currency", type: "char", length: 3, nullable: true })
  currency!: string | null;

  @Column({ name: "customer_acceptance", type: "jsonb" })
  customerAcceptance!: StoredAcceptance;

  /** The payment a single-use mandate was taken by (before its processor was asked); null while free. */
  @Column({ name: "used_by_payment_id", type: "varchar", length: 64, nullable: true })
  usedByPaymentId!: string | null;

  @Column({ name: "created", type: "timestamptz" })
  created!: Date;

  @Column({ name: "updated", type: "timestamptz" })
  updated!: Date;
}

/**
 * What an off-session setup asks its mandate to be, kept on the payment until its outcome writes the
 * mandate (or drops the request when the payment fails).
 */
export interface StoredMandateRequest {
  type: MandateTypeWord;
  /** In the smallest unit, as a string (JSON has no 64-bit integers). */
  amount_limit: string | null;
  currency: string | null;
  customer_acceptance: StoredAcceptance;
}
