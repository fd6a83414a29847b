import { StateMachine } from "../state-machine.js";
import type { PayoutStatusWord } from "./payout.entity.js";

/** What can be done to a payout. */
export type PayoutOperation = "fulfill" | "cancel" | "send";

/**
 * The payout state machine (decisions §9): an unconfirmed payout waits in requires_fulfillment
 * until fulfilled (pending) or cancelled; a pending one is sent until it succeeds or fails.
 */
export const payoutStates = new StateMachine<PayoutStatusWord, PayoutOperation>(
  "payout",
  {
    fulfill: { from: ["requires_fulfillment"], to: ["pending"], action: "fulfilled" },
    cancel: { from: ["requires_fulfillment"], to: ["cancelled"], action: "cancelled" },
    send: { from: ["pending"], to: ["success", "failed"], action: "sent" },
  },
  ["success", "failed", "cancelled"],
);
