import { Column, Entity, PrimaryColumn } from "typeorm";
import type { AddressJson } from "../validation/address.js";

/**
 * A saved payment method (decisions §10): a card kept for a customer, or a client-side token attached
 * to none. Deleting keeps the row (deleted_at) without its encrypted number, so the id stays known.
 */
@Entity({ name: "payment_methods" })
export class PaymentMethodRow {
  @PrimaryColumn({ name: "merchant_id", type: "varchar", length: 64 })
  merchantId!: string;

  @PrimaryColumn({ name: "livemode", type: "boolean" })
  livemode!: boolean;

  @PrimaryColumn({ name: "payment_method_id", type: "varchar", length: 64 })
  paymentMethodId!: string;

  /** Null for a client-side token nothing has attached yet. */
  @Column({ name: "customer_id", type: "varchar", length: 64, nullable: true })
  customerId!: string | null;

  @Column({ name: "payment_method", type: "varchar", length: 16 })
  paymentMethod!: "card";

  @Column({ name: "payment_method_type", type: "varchar", length: 32, nullable: true })
  paymentMethodType!: string | null;

  @Column({ name: "card_last4", type: "varchar", length: 4 })
  cardLast4!: string;

  @Column({ name: "card_brand", type: "varchar", length: 16 })
  cardBrand!: string;

  @Column({ name: "card_exp_month", type: "smallint" })
  cardExpMonth!: number;

  /** Four digits. */
  @Column({ name: "card_exp_year", type: "smallint" })
  cardExpYear!: number;

  @Column({ name: "card_holder_name", type: "text", nullable: true })
  cardHolderName!: string | null;

  /** The card number's keyed hash within the merchant (fingerprint.ts): how the same card is recognised. */
  @Column({ name: "card_fingerprint", type: "varchar", length: 32 })
  cardFingerprint!: string;

  /** The card number encrypted with DATA_ENCRYPTION_KEY (src/secrets/data-cipher.ts); null once deleted. */
  @Column({ name: "card_ciphertext", type: "text", nullable: true })
  cardCiphertext!: string | null;

  @Column({ name: "billing", type: "jsonb", nullable: true })
  billing!: AddressJson | null;

  @Column({ name: "metadata", type: "jsonb" })
  metadata!: Record<string, string>;

  @Column({ name: "created", type: "timestamptz" })
  created!: Date;

  @Column({ name: "updated", type: "timestamptz" })
  updated!: Date;

  /** When an unattached token is removed (24 hours after it was made); null once attached. */
  @Column({ name: "expires_at", type: "timestamptz", nullable: true })
  expiresAt!: Date | null;

  /** The one payment an unattached token paid for (or is paying for); null for a customer's card. */
  @Column({ name: "used_by_payment_id", type: "varchar", length: 64, nullable: true })
  usedByPaymentId!: string | null;

  /**
   * The payment saving this card for its customer (setup_future_usage) while its outcome is unknown:
   * the payment method is shown, and can pay, once that payment succeeds or is authorized.
   */
  @Column({ name: "pending_payment_id", type: "varchar", length: 64, nullable: true })
  pendingPaymentId!: string | null;

  @Column({ name: "deleted_at", type: "timestamptz", nullable: true })
  deletedAt!: Date | null;
}
