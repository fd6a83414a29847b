import { StateMachine } from "../state-machine.js";
import type { RefundStatusWord } from "./refund.entity.js";

/** What can be done to a refund. */
export type RefundOperation = "process" | "cancel";

/**
 * The refund state machine (decisions §9): a refund is created pending, and either the processor
 * decides it or (scheduled refunds only) the merchant cancels it first.
 */
export const refundStates = new StateMachine<RefundStatusWord, RefundOperation>(
  "refund",
  {
    process: { from: ["pending"], to: ["succeeded", "failed", "manual_review"], action: "processed" },
    cancel: { from: ["pending"], to: ["cancelled"], action: "cancelled" },
  },
  ["succeeded", "failed", "cancelled", "manual_review"],
);
