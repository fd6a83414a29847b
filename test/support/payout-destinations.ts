import type { JsonObject } from "@bufbuild/protobuf";
import type { TestMerchant } from "./merchant.js";

/** Sandbox payout cards (decisions §3, docs/payouts.md): one list for every payout test. */
export const payoutCards = {
  succeeds: "4242424242424242",
  declined: "4000000000000002",
  insufficientFunds: "4000000000009995",
  /** sandbox_instant fails retryably (processing_error), sandbox_card sends it. */
  instantFails: "4000000000000119",
  /** Luhn-valid, but not a sandbox test card. */
  unsupported: "4012888888881881",
} as const;

/** Sandbox payout bank accounts (decisions §3, docs/payouts.md). */
export const payoutAccounts = {
  succeeds: "000123456789",
  closed: "000111111116",
  /** sandbox_ach fails retryably (processor_unavailable), sandbox_swift sends it. */
  achUnavailable: "000222222227",
  /** Every bank rail fails retryably. */
  allUnavailable: "000333333335",
  /** Succeeds, but the bank answers 2 seconds after moving the money: the payout stays pending meanwhile. */
  slow: "000999999991",
} as const;

/** Create bodies for payouts to the sandbox destinations, as payout tests send them. */
export interface PayoutBodies {
  /** payout_method_data with a destination card: a future expiry, no CVC (money is sent, not taken). */
  cardMethod(number: string, fields?: JsonObject): JsonObject;
  /** payout_method_data with a destination bank account. */
  bankMethod(account: string, fields?: JsonObject): JsonObject;
  /** A create body for a card payout of 1000 USD (regular priority, confirmed by default). */
  cardPayout(merchant: TestMerchant, number: string, extra?: JsonObject): JsonObject;
  /** A create body for a bank payout of 1000 USD (regular priority, confirmed by default). */
  bankPayout(merchant: TestMerchant, account: string, extra?: JsonObject): JsonObject;
}

/** The payout bodies of a suite whose service runs on `now()`: destination cards expire three years after it. */
export function payoutBodies(now: () => Date): PayoutBodies {
  const cardMethod = (number: string, fields: JsonObject = {}): JsonObject => ({
    card: {
      card_number: number,
      card_exp_month: "12",
      card_exp_year: String(now().getUTCFullYear() + 3),
      card_holder_name: "Ada Lovelace",
      ...fields,
    },
  });
  const bankMethod = (account: string, fields: JsonObject = {}): JsonObject => ({
    bank: {
      bank_name: "Sandbox Bank",
      bank_account_number: account,
      bank_routing_number: "110000000",
      bank_account_holder_name: "Ada Lovelace",
      ...fields,
    },
  });
  return {
    cardMethod,
    bankMethod,
    cardPayout: (merchant, number, extra = {}) => ({
      amount: 1000,
      currency: "USD",
      profile_id: merchant.profileId,
      payout_type: "card",
      payout_method_data: cardMethod(number),
      ...extra,
    }),
    bankPayout: (merchant, account, extra = {}) => ({
      amount: 1000,
      currency: "USD",
      profile_id: merchant.profileId,
      payout_type: "bank",
      payout_method_data: bankMethod(account),
      ...extra,
    }),
  };
}
