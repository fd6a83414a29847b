import { unexpectedState } from "./errors.js";

/** One operation of a resource's state machine: the statuses it may start from and those it may lead to. */
export interface Transition<Status extends string> {
  readonly from: readonly Status[];
  /** Empty for an operation that checks the status without changing it (refunding a payment). */
  readonly to: readonly Status[];
  /** The operation in the past tense, as the error message says it: "captured", "given evidence". */
  readonly action: string;
  /** IR_14 for captures and refunds of a payment (decisions §5); IR_16, the default, otherwise. */
  readonly code?: "IR_14" | "IR_16";
}

/**
 * A resource's statuses and the operations that move between them: the one place that says which
 * operation may run from which status. Services, jobs and pages all guard and move through it, so a
 * status can only change the way its table allows, and a wrong status always gets the same
 * structured error.
 */
export class StateMachine<Status extends string, Operation extends string> {
  private readonly finalStatuses: ReadonlySet<Status>;

  constructor(
    /** "payment": how error messages name the object. */
    readonly object: string,
    readonly transitions: Readonly<Record<Operation, Transition<Status>>>,
    /** Statuses nothing leaves: the object's pending jobs end when it reaches one. */
    final: readonly Status[],
  ) {
    this.finalStatuses = new Set(final);
  }

  /** Whether `operation` may start from `status`; a job uses it to leave an object that moved on alone. */
  allows(operation: Operation, status: Status): boolean {
    return this.transitions[operation].from.includes(status);
  }

  /** Throws the unexpected-state error (IR_14/IR_16, naming current and expected) unless `operation` may start from `status`. */
  guard(operation: Operation, status: Status): void {
    if (this.allows(operation, status)) return;
    const { action, from, code = "IR_16" } = this.transitions[operation];
    throw unexpectedState({ object: this.object, action, status, expected: from, code });
  }

  /**
   * Moves `row` by `operation` into `to`. A move the table does not allow is a fault of ours (the
   * guard runs before any work), so it is an internal error, never a client's.
   */
  move(row: { status: Status }, operation: Operation, to: Status): void {
    const transition = this.transitions[operation];
    if (!transition.from.includes(row.status) || !transition.to.includes(to)) {
      throw new Error(`${this.object} ${operation}: no transition from ${row.status} to ${to}`);
    }
    row.status = to;
  }

  /** Whether nothing leaves `status`. */
  isFinal(status: Status): boolean {
    return this.finalStatuses.has(status);
  }
}
