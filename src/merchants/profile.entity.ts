import { Column, Entity, PrimaryColumn } from "typeorm";
import { bigintColumn } from "../db/bigint.js";

/** A merchant's business profile: return URL for redirects and webhook destination. */
@Entity({ name: "profiles" })
export class ProfileRow {
  @PrimaryColumn({ name: "profile_id", type: "varchar", length: 64 })
  profileId!: string;

  @Column({ name: "merchant_id", type: "varchar", length: 64 })
  merchantId!: string;

  @Column({ name: "profile_name", type: "text", nullable: true })
  profileName!: string | null;

  @Column({ name: "return_url", type: "text", nullable: true })
  returnUrl!: string | null;

  @Column({ name: "webhook_url", type: "text", nullable: true })
  webhookUrl!: string | null;

  @Column({ name: "webhook_secret", type: "text" })
  webhookSecret!: string;

  /** The secret a rotation replaced: deliveries are signed with it too until `previousWebhookSecretUntil`. */
  @Column({ name: "previous_webhook_secret", type: "text", nullable: true })
  previousWebhookSecret!: string | null;

  @Column({ name: "previous_webhook_secret_until", type: "timestamptz", nullable: true })
  previousWebhookSecretUntil!: Date | null;

  /** The processing fee of a captured payment, in basis points of what was received. */
  @Column({ name: "processing_fee_bps", type: "integer" })
  processingFeeBps!: number;

  /** The fee of a dispute, in the smallest currency unit, given back when the dispute is won. */
  @Column({ name: "dispute_fee", type: "bigint", transformer: bigintColumn })
  disputeFee!: bigint;

  /** How many days a captured payment's credit stays pending before it can be paid out. */
  @Column({ name: "settlement_delay_days", type: "integer" })
  settlementDelayDays!: number;

  @Column({ name: "created", type: "timestamptz" })
  created!: Date;
}
