import { describe, expect, it } from "vitest";
import { disputeStates } from "./disputes/states.js";
import { ApiError } from "./errors.js";
import { paymentStates } from "./payments/states.js";
import { payoutStates } from "./payouts/states.js";
import { refundStates } from "./refunds/states.js";
import type { StateMachine } from "./state-machine.js";

/** Every status of each resource, as the protos list them (lower-case words). */
const machines: [StateMachine<string, string>, readonly string[]][] = [
  [
    paymentStates,
    [
      "requires_payment_method",
      "requires_confirmation",
      "requires_action",
      "processing",
      "requires_capture",
      "succeeded",
      "failed",
      "cancelled",
    ],
  ],
  [refundStates, ["pending", "succeeded", "failed", "cancelled", "manual_review"]],
  [payoutStates, ["pending", "requires_fulfillment", "success", "failed", "cancelled"]],
  [disputeStates, ["opened", "challenged", "accepted", "won", "lost", "expired"]],
];

describe.each(machines.map(([machine, statuses]) => [machine.object, machine, statuses] as const))(
  "the %s state machine",
  (_, machine, statuses) => {
    const operations = Object.keys(machine.transitions);

    it("leads only to statuses the resource has", () => {
      for (const transition of Object.values(machine.transitions)) {
        expect(statuses).toEqual(expect.arrayContaining([...transition.from, ...transition.to]));
      }
    });

    it("never moves an object out of a final status", () => {
      for (const transition of Object.values(machine.transitions)) {
        if (transition.from.some((status) => machine.isFinal(status))) expect(transition.to).toEqual([]);
      }
    });

    it.each(operations.flatMap((operation) => statuses.map((status) => [operation, status] as const)))(
      "%s from %s: allowed exactly when the table says so, else the structured unexpected-state error",
      (operation, status) => {
        const transition = machine.transitions[operation]!;
        const allowed = transition.from.includes(status);
        expect(machine.allows(operation, status)).toBe(allowed);
        if (allowed) {
          expect(() => machine.guard(operation, status)).not.toThrow();
          return;
        }
        let thrown: unknown;
        try {
          machine.guard(operation, status);
        } catch (error) {
          thrown = error;
        }
        expect(thrown).toBeInstanceOf(ApiError);
        expect((thrown as ApiError).code).toBe(transition.code ?? "IR_16");
        expect((thrown as ApiError).message).toBe(
          `This ${machine.object} cannot be ${transition.action} because its status is ${status}; expected ${transition.from.join(" or ")}`,
        );
      },
    );

    it("moves only along the table, and treats any other move as a fault of ours", () => {
      for (const [operation, transition] of Object.entries(machine.transitions)) {
        for (const from of statuses) {
          for (const to of statuses) {
            const row = { status: from };
            if (transition.from.includes(from) && transition.to.includes(to)) {
              machine.move(row, operation, to);
              expect(row.status).toBe(to);
            } else {
              expect(() => machine.move(row, operation, to)).toThrow(Error);
              expect(() => machine.move(row, operation, to)).not.toThrow(ApiError);
              expect(row.status).toBe(from);
            }
          }
        }
      }
    });
  },
);

describe("the documented codes of a wrong status (decisions §5)", () => {
  it.each([
    [paymentStates, "capture", "requires_payment_method", "IR_14"],
    [paymentStates, "refund", "requires_capture", "IR_14"],
    [paymentStates, "confirm", "succeeded", "IR_16"],
    [paymentStates, "cancel", "succeeded", "IR_16"],
    [payoutStates, "fulfill", "pending", "IR_16"],
    [disputeStates, "accept", "won", "IR_16"],
    [refundStates, "cancel", "succeeded", "IR_16"],
  ] as const)("%#: %s from %s is %s", (machine, operation, status, code) => {
    expect(() => (machine as StateMachine<string, string>).guard(operation, status)).toThrow(expect.objectContaining({ code }));
  });
});
