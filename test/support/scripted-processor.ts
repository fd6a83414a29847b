import type {
  AuthorizeResult,
  CardDetails,
  Processor,
  ProcessorAnswers,
  RefundResult,
  StepResult,
} from "../../src/processors/processor.js";

/*
 * A fake payment processor for in-process tests: it records every request it receives and answers
 * each method from a queue of scripted answers, falling back to success. It stands where a real
 * connector would (the ProcessorRegistry is handed it), so a test can say what the processor was
 * asked and make it decline, ask for 3DS or fail outright. Our own database is never faked.
 */

/** A request the processor received, by method. */
export type ProcessorCall =
  | { readonly method: "authorize"; readonly request: Parameters<Processor["authorize"]>[0] }
  | { readonly method: "completeAuthentication"; readonly request: Parameters<Processor["completeAuthentication"]>[0] }
  | { readonly method: "capture"; readonly request: Parameters<Processor["capture"]>[0] }
  | { readonly method: "void"; readonly request: Parameters<Processor["void"]>[0] }
  | { readonly method: "refund"; readonly request: Parameters<Processor["refund"]>[0] };

/** The methods that reach the processor, i.e. can be scripted and are recorded. */
export type ProcessorMethod = ProcessorCall["method"];

/** What each method answers, without the reference (the fake makes one up unless given). */
type Answer<R> = R extends { readonly reference: string } ? Omit<R, "reference"> & { readonly reference?: string } : never;
interface Answers {
  authorize: Answer<AuthorizeResult>;
  completeAuthentication: Answer<AuthorizeResult>;
  capture: Answer<StepResult>;
  void: Answer<StepResult>;
  refund: Answer<RefundResult>;
}

/** An answer the processor gave and the network lost: the processor keeps it, the caller gets an error. */
export class LostAnswer<A> extends Error {
  constructor(readonly answer: A) {
    super("socket hang up");
  }
}

/** Scripts an answer the processor gives and keeps, while its caller only sees the connection drop. */
export function lostAnswer<A>(answer: A): LostAnswer<A> {
  return new LostAnswer(answer);
}

/** A scripted answer: a result, an error to throw (an outage, a timeout), a lost answer, or a promise the test settles. */
export type Scripted<M extends ProcessorMethod> = Answers[M] | Error | Promise<Answers[M]>;

/** The request type of one method's calls. */
type RequestOf<M extends ProcessorMethod> = Extract<ProcessorCall, { method: M }>["request"];

/** A Processor whose answers a test scripts and whose requests it reads back. */
export class ScriptedProcessor implements Processor {
  /** Every request received, in order. */
  readonly calls: ProcessorCall[] = [];
  private readonly scripts = new Map<ProcessorMethod, Scripted<ProcessorMethod>[]>();
  private references = 0;
  /** The answer given to each idempotency key, as a real processor's records hold them; undefined: recalled unseen. */
  private readonly answered = new Map<string, unknown>();

  /** `name` is what payments record; a name other than "sandbox" shows later steps follow the record. */
  constructor(readonly name = "scripted") {}

  /** Queues the answer to the next call of `method`; unscripted calls succeed. */
  script<M extends ProcessorMethod>(method: M, answer: Scripted<M>): this {
    const queue = this.scripts.get(method) ?? [];
    queue.push(answer as Scripted<ProcessorMethod>);
    this.scripts.set(method, queue);
    return this;
  }

  /** Forgets the calls and the unused answers, so each test starts from a processor that has seen nothing. */
  reset(): void {
    this.calls.length = 0;
    this.scripts.clear();
    this.answered.clear();
  }

  /** The requests `method` received, in order. */
  callsTo<M extends ProcessorMethod>(method: M): RequestOf<M>[] {
    return this.calls.filter((call) => call.method === method).map((call) => call.request as RequestOf<M>);
  }

  /** Every card is accepted: which cards a processor knows is the sandbox's business, not the fake's. */
  checkCard(_card: Omit<CardDetails, "cvc">, _field: string): void {}

  authorize(request: RequestOf<"authorize">): Promise<AuthorizeResult> {
    return this.answer({ method: "authorize", request }, { status: request.capture ? "captured" : "authorized" });
  }

  completeAuthentication(request: RequestOf<"completeAuthentication">): Promise<AuthorizeResult> {
    return this.answer(
      { method: "completeAuthentication", request },
      { status: request.capture ? "captured" : "authorized", reference: request.reference },
    );
  }

  capture(request: RequestOf<"capture">): Promise<StepResult> {
    return this.answer({ method: "capture", request }, { status: "succeeded" });
  }

  void(request: RequestOf<"void">): Promise<StepResult> {
    return this.answer({ method: "void", request }, { status: "succeeded" });
  }

  refund(request: RequestOf<"refund">): Promise<RefundResult> {
    return this.answer({ method: "refund", request }, { status: "succeeded" });
  }

  /** The answer given to the key, as recovery asks for it; a key never seen is refused from then on. */
  async recall<Operation extends keyof ProcessorAnswers>(
    _operation: Operation,
    idempotencyKey: string,
  ): Promise<ProcessorAnswers[Operation] | undefined> {
    if (!this.answered.has(idempotencyKey)) this.answered.set(idempotencyKey, undefined);
    return this.answered.get(idempotencyKey) as ProcessorAnswers[Operation] | undefined;
  }

  /** Records the call and answers with the next scripted answer, else `fallback`; a key answered before gets that answer again. */
  private async answer<M extends ProcessorMethod>(
    call: Extract<ProcessorCall, { method: M }>,
    fallback: Answers[M],
  ): Promise<Answers[M] & { readonly reference: string }> {
    this.calls.push(call);
    const key = call.request.idempotencyKey;
    if (this.answered.has(key)) {
      const first = this.answered.get(key) as (Answers[M] & { readonly reference: string }) | undefined;
      return first ?? ({ status: "declined", reference: "recalled", errorCode: "attempt_abandoned", errorMessage: "recalled" } as never);
    }
    const scripted = (this.scripts.get(call.method)?.shift() as Scripted<M> | undefined) ?? fallback;
    if (scripted instanceof LostAnswer) {
      this.answered.set(key, { reference: `${this.name}_${call.method}_${++this.references}`, ...(scripted.answer as Answers[M]) });
      throw scripted;
    }
    if (scripted instanceof Error) throw scripted;
    const answer = { reference: `${this.name}_${call.method}_${++this.references}`, ...(await scripted) };
    this.answered.set(key, answer);
    return answer;
  }
}
