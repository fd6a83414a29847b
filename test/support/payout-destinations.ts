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
