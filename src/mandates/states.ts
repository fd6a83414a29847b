import { StateMachine } from "../state-machine.js";
import type { MandateStatusWord } from "./mandate.entity.js";

/** What can happen to a mandate. */
export type MandateOperation = "revoke" | "use";

/**
 * The mandate state machine (decisions §10): an active mandate is revoked (by the merchant, or with
 * its payment method or customer), or a single-use one is used up by the payment it allowed.
 */
export const mandateStates = new StateMachine<MandateStatusWord, MandateOperation>(
  "mandate",
  {
    revoke: { from: ["active"], to: ["revoked"], action: "revoked" },
    use: { from: ["active"], to: ["inactive"], action: "used" },
  },
  ["revoked", "inactive"],
);
