import { Column, Entity, PrimaryColumn } from "typeorm";
import { bigintColumn } from "../db/bigint.js";

/** The movements of money decisions §11 accounts, as stored. */
export type BalanceTransactionTypeWord = "payment" | "refund" | "dispute" | "dispute_reversal" | "payout" | "payout_reversal";

/**
 * One movement of a merchant's money, written with the change that caused it and never changed
 * after (the table refuses updates and deletes). Its status is not stored: it is `pending` until
 * `available_on` on the service's clock, which moves without anyone writing. Its ledger lines
 * (`line_accounts`, `line_amounts`) are not mapped: the API does not show them, and the statement
 * that writes the row and `ledger:verify` handle them in SQL (ledger/entries.ts, verify.ts).
 */
@Entity({ name: "balance_transactions" })
export class BalanceTransactionRow {
  @PrimaryColumn({ name: "merchant_id", type: "varchar", length: 64 })
  merchantId!: string;

  @PrimaryColumn({ name: "livemode", type: "boolean" })
  livemode!: boolean;

  @PrimaryColumn({ name: "balance_transaction_id", type: "varchar", length: 64 })
  balanceTransactionId!: string;

  /** The profile whose fees and settlement delay priced it. */
  @Column({ name: "profile_id", type: "varchar", length: 64 })
  profileId!: string;

  @Column({ name: "type", type: "varchar", length: 32 })
  type!: BalanceTransactionTypeWord;

  /** Signed: credits to the merchant positive. */
  @Column({ name: "amount", type: "bigint", transformer: bigintColumn })
  amount!: bigint;

  @Column({ name: "fee", type: "bigint", transformer: bigintColumn })
  fee!: bigint;

  /** `amount - fee`, what the merchant's balance moved by. */
  @Column({ name: "net", type: "bigint", transformer: bigintColumn })
  net!: bigint;

  @Column({ name: "currency", type: "char", length: 3 })
  currency!: string;

  /** The payment, refund, dispute or payout that moved the money. */
  @Column({ name: "source_id", type: "varchar", length: 64 })
  sourceId!: string;

  @Column({ name: "available_on", type: "timestamptz" })
  availableOn!: Date;

  @Column({ name: "created", type: "timestamptz" })
  created!: Date;
}
