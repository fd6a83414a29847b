import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import type { DataSource, EntityManager } from "typeorm";

/** The part of a handler's context that says how the call commits (tests of the writers give just this). */
export type CallValues = Pick<HandlerContext, "values">;

/** Stores a call's response in the transaction that commits the call's effect. */
export interface ResponseRecorder {
  record(em: EntityManager, response: unknown): Promise<void>;
  /**
   * Says the call wrote a record before its effect (a payment before its processor is asked): if the
   * call fails, its key waits for the same request's retry, which must find that record.
   */
  keepForRetry(): void;
}

/**
 * The recorder of a call that carries an idempotency key, set by the idempotency interceptor
 * (src/idempotency/interceptor.ts) for the handler's `UnitOfWork.commit`.
 */
export const responseRecorderKey = createContextKey<ResponseRecorder | undefined>(undefined, {
  description: "idempotent response recorder",
});

/** What the idempotency interceptor tells a handler of a call with a key. */
export interface IdempotentCall {
  /** The client's idempotency key: an attempt recorded under it is this request's own (no other request may use it). */
  readonly key: string;
  /**
   * The seed of the ids of the objects the call creates, kept by the key (idempotency/store.ts) for
   * every retry of the request, so a retry that meets the record its crashed or failed first try
   * made names the same object instead of creating a second one.
   */
  readonly effectSeed: string;
}

/** Set by the idempotency interceptor for a call with a key. */
export const idempotentCallKey = createContextKey<IdempotentCall | undefined>(undefined, { description: "the call's idempotency key" });

/**
 * How an API call's effect reaches the database: a handler commits it once, with `commit`, in one
 * transaction whose work returns the call's response. When the call carries an idempotency key the
 * same transaction stores that response, so a retry finds the effect and its response, or neither.
 * What runs before (validation, a claim, the processor call) runs outside it: a transaction is never
 * held open across a call to a processor.
 */
export class UnitOfWork {
  constructor(private readonly dataSource: DataSource) {}

  /** Whether the call's effect must commit with its stored response: it cannot share a statement with other calls' writes. */
  recordsResponse(ctx: CallValues): boolean {
    return ctx.values.get(responseRecorderKey) !== undefined;
  }

  /**
   * Runs `work`, which writes with exactly one statement, in a transaction only when the call's
   * response is stored with it; otherwise the statement commits alone, in one round trip instead of
   * three (BEGIN, the statement, COMMIT).
   */
  commitStatement<T>(ctx: CallValues, work: (em: EntityManager) => Promise<T>): Promise<T> {
    return this.recordsResponse(ctx) ? this.commit(ctx, work) : work(this.dataSource.manager);
  }

  /** Runs `work` in one transaction that, for a call with an idempotency key, also stores the response `work` returns. */
  commit<T>(ctx: CallValues, work: (em: EntityManager) => Promise<T>): Promise<T> {
    const recorder = ctx.values.get(responseRecorderKey);
    return this.dataSource.transaction(async (em) => {
      const response = await work(em);
      await recorder?.record(em, response);
      return response;
    });
  }
}
