import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import type { DataSource, EntityManager } from "typeorm";

/** The part of a handler's context that says how the call commits (tests of the writers give just this). */
export type CallValues = Pick<HandlerContext, "values">;

/**
 * A call's response as the answer of its idempotency key, handed to the statement that writes the
 * call's effect so that both commit together, in a batch with other calls' effects.
 */
export interface KeyAnswer {
  readonly merchantId: string;
  readonly livemode: boolean;
  readonly key: string;
  /**
   * The claim of the request the key belongs to: the effect is written only while that request still
   * holds the key. Null for recovery, which answers the key of a request that is gone, if it is still in flight.
   */
  readonly claimToken: string | null;
  readonly response: Uint8Array;
}

/** Stores a call's response with the call's effect. */
export interface ResponseRecorder {
  /** Stores the response in `em`'s transaction, which commits the call's effect. */
  record(em: EntityManager, response: unknown): Promise<void>;
  /** The response as the key's answer, for the statement that writes the effect (objects/writer.ts). */
  answer(response: unknown): KeyAnswer;
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
  /**
   * Whether an earlier try of the request left the key (it failed with the database, or its instance
   * died): what it recorded may exist, and the request was valid when that try checked it.
   */
  readonly retried: boolean;
}

/** Set by the idempotency interceptor for a call with a key. */
export const idempotentCallKey = createContextKey<IdempotentCall | undefined>(undefined, { description: "the call's idempotency key" });

/**
 * How an API call's effect that needs a transaction (rows it locks, several statements) reaches the
 * database: a handler commits it once, with `commit`, in one transaction whose work returns the
 * call's response. When the call carries an idempotency key the same transaction stores that
 * response, so a retry finds the effect and its response, or neither. What runs before (validation,
 * a claim, the processor call) runs outside it: a transaction is never held open across a call to a
 * processor. An effect of one statement (a new object, a claimed object's outcome) goes through the
 * object writer instead (objects/writer.ts), with the response as one more part of its statement.
 */
export class UnitOfWork {
  constructor(private readonly dataSource: DataSource) {}

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
