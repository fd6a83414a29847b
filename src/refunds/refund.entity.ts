import { Column, Entity, PrimaryColumn } from "typeorm";
import { bigintColumn } from "../db/bigint.js";

/** Refund statuses (interface §2), as stored. */
export type RefundStatusWord = "pending" | "succeeded" | "failed" | "cancelled" | "manual_review";

/** Money returned on a succeeded payment. */
@Entity({ name: "refunds" })
export class RefundRow {
  @PrimaryColumn({ name: "merchant_id", type: "varchar", length: 64 })
  merchantId!: string;

  @PrimaryColumn({ name: "livemode", type: "boolean" })
  livemode!: boolean;

  @PrimaryColumn({ name: "refund_id", type: "varchar", length: 64 })
  refundId!: string;

  @Column({ name: "payment_id", type: "varchar", length: 64 })
  paymentId!: string;

  /** The business profile whose webhook_url receives this object's events: its payment's. */
  @Column({ name: "profile_id", type: "varchar", length: 64 })
  profileId!: string;

  @Column({ name: "status", type: "varchar", length: 32 })
  status!: RefundStatusWord;

  @Column({ name: "amount", type: "bigint", transformer: bigintColumn })
  amount!: bigint;

  @Column({ name: "currency", type: "char", length: 3 })
  currency!: string;

  @Column({ name: "reason", type: "varchar", length: 32, nullable: true })
  reason!: string | null;

  /** instant: processed as soon as it is created; scheduled: at the next settlement run. */
  @Column({ name: "refund_type", type: "varchar", length: 16 })
  refundType!: "instant" | "scheduled";

  @Column({ name: "error_code", type: "text", nullable: true })
  errorCode!: string | null;

  @Column({ name: "error_message", type: "text", nullable: true })
  errorMessage!: string | null;

  @Column({ name: "metadata", type: "jsonb" })
  metadata!: Record<string, string>;

  @Column({ name: "processor_reference", type: "text", nullable: true })
  processorReference!: string | null;

  @Column({ name: "created", type: "timestamptz" })
  created!: Date;

  @Column({ name: "updated", type: "timestamptz" })
  updated!: Date;

  /** The operation holding this object while it waits for a processor (src/db/claims.ts), and until when. */
  @Column({ name: "claim_token", type: "varchar", length: 32, nullable: true })
  claimToken!: string | null;

  @Column({ name: "claimed_until", type: "timestamptz", nullable: true })
  claimedUntil!: Date | null;
}
