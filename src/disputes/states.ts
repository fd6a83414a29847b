import { StateMachine } from "../state-machine.js";
import type { DisputeStatusWord } from "./dispute.entity.js";

/** What can be done to a dispute. */
export type DisputeOperation = "accept" | "submitEvidence" | "expire" | "resolve";

/** Statuses in which the dispute is still undecided. */
export const openStatuses: readonly DisputeStatusWord[] = ["opened", "challenged"];

/**
 * The dispute state machine (decisions §9): an open dispute is accepted, challenged with evidence,
 * or expires when evidence_due_by passes without any; the network decides a challenged one.
 */
export const disputeStates = new StateMachine<DisputeStatusWord, DisputeOperation>(
  "dispute",
  {
    accept: { from: openStatuses, to: ["accepted"], action: "accepted" },
    submitEvidence: { from: openStatuses, to: ["challenged"], action: "given evidence" },
    expire: { from: ["opened"], to: ["expired"], action: "expired" },
    /** The network decides a challenged dispute (the sandbox stands in for it). */
    resolve: { from: ["challenged"], to: ["won", "lost"], action: "resolved" },
  },
  ["accepted", "won", "lost", "expired"],
);
