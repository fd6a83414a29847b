import { Column, Entity, PrimaryColumn } from "typeorm";
import { bigintColumn } from "../db/bigint.js";

/** Dispute statuses (decisions §9), as stored. */
export type DisputeStatusWord = "opened" | "challenged" | "accepted" | "won" | "lost" | "expired";

/** Evidence as stored; keys are the API's snake_case names. */
export type StoredEvidence = Partial<
  Record<
    "uncategorized_text" | "customer_communication" | "receipt" | "shipping_documentation" | "product_description" | "refund_policy",
    string
  >
>;

/** A cardholder's dispute of a payment, reported by the processor. */
@Entity({ name: "disputes" })
export class DisputeRow {
  @PrimaryColumn({ name: "merchant_id", type: "varchar", length: 64 })
  merchantId!: string;

  @PrimaryColumn({ name: "livemode", type: "boolean" })
  livemode!: boolean;

  @PrimaryColumn({ name: "dispute_id", type: "varchar", length: 64 })
  disputeId!: string;

  @Column({ name: "payment_id", type: "varchar", length: 64 })
  paymentId!: string;

  /** The business profile whose webhook_url receives this object's events: its payment's. */
  @Column({ name: "profile_id", type: "varchar", length: 64 })
  profileId!: string;

  @Column({ name: "status", type: "varchar", length: 32 })
  status!: DisputeStatusWord;

  @Column({ name: "amount", type: "bigint", transformer: bigintColumn })
  amount!: bigint;

  @Column({ name: "currency", type: "char", length: 3 })
  currency!: string;

  @Column({ name: "reason", type: "text", nullable: true })
  reason!: string | null;

  @Column({ name: "evidence_due_by", type: "timestamptz" })
  evidenceDueBy!: Date;

  @Column({ name: "evidence", type: "jsonb", nullable: true })
  evidence!: StoredEvidence | null;

  @Column({ name: "metadata", type: "jsonb" })
  metadata!: Record<string, string>;

  @Column({ name: "created", type: "timestamptz" })
  created!: Date;

  @Column({ name: "updated", type: "timestamptz" })
  updated!: Date;
}
