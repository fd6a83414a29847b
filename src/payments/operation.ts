import { create, toBinary } from "@bufbuild/protobuf";
import type { DataSource, EntityManager } from "typeorm";
import { PaymentSchema } from "../../gen/paymentservice/v1/payment_pb.js";
import { claimLeaseMs, type Claimed, type ObjectClaims } from "../objects/claims.js";
import { holderGone, holderOf } from "../db/liveness.js";
import type { Alongside, ObjectWriter } from "../objects/writer.js";
import { preparedIn, preparedQuery } from "../db/prepared.js";
import type { Scope } from "../db/scope.js";
import { responseRecorderKey, type CallValues } from "../db/unit-of-work.js";
import { claimLost } from "../errors.js";
import { failpoint } from "../failpoints.js";
import type { JobWaker, NewJob } from "../jobs/runner.js";
import type { CardDetails } from "../processors/processor.js";
import type { AttemptCall, PaymentRow, PaymentStatusWord, StoredAttempt } from "./payment.entity.js";
import { outcomeAlongside } from "./future-usage.js";
import { paymentResource } from "./store.js";
import { applyAttempt, callAttempt, recallAttempt, type AttemptAnswer, type PaymentMoveDependencies } from "./attempts.js";

/*
 * How every payment operation that may call a processor runs (operations/: the API's create with
 * confirm, confirm, capture and cancel, the 3DS page, the scheduled capture and the expiry jobs),
 * record first:
 *
 *   claim the payment → settle an attempt a crash left on it → decide the move → record its attempt
 *   → call the processor, no transaction open → write the outcome, its event and jobs, clearing the
 *   attempt and the claim, with the API call's response when it has an idempotency key.
 *
 * A crash after the record leaves the attempt on the payment. Whoever claims the payment next settles
 * it first: the retry of the same API call makes the same call again (the processor answers its
 * idempotency key with the first answer), anyone else asks the processor what the call did
 * (`Processor.recall`); the recovery upkeep does the same for payments nobody touches.
 */

/** What the operations need: the database, its claims and writer, time, the processors, and the job runner to wake. */
export interface PaymentOperationDependencies extends PaymentMoveDependencies {
  readonly dataSource: DataSource;
  readonly claims: ObjectClaims;
  readonly writer: ObjectWriter;
  readonly jobs: JobWaker;
}

/** The API call an operation answers: its context (whose idempotency key stores the response) and that key. */
export interface ApiCall {
  readonly ctx: CallValues & { readonly signal?: AbortSignal };
  /** The call's idempotency key: an attempt recorded under it is this call's own, to finish rather than recall. */
  readonly requestKey: string | undefined;
}

/** One operation on an existing payment. */
export interface PaymentOperation {
  /**
   * Checks the claimed payment before the move (the client secret, a job's due status): errors answer
   * the call; false leaves the payment alone (a job whose payment moved on) and the operation answers undefined.
   */
  check(row: PaymentRow): boolean;
  /** The move: the processor call to make, or undefined when the move is already applied to the row. */
  move(row: PaymentRow): AttemptCall | undefined;
  /** The card of an authorization, which only the API call that sent it has. */
  readonly card?: CardDetails;
  /** What the record of the move's attempt writes besides (payments/future-usage.ts), decided on the moved row. */
  alongside?(row: PaymentRow): Alongside | undefined;
}

/** What an operation did to the payment: its row now, and whether its final status ended its pending jobs. */
export interface Operated {
  readonly row: PaymentRow;
  readonly ended: boolean;
}

/**
 * Runs `operation` on the payment: as the API call `call` (its response stored with the outcome), or
 * for a job or the 3DS page when undefined. Undefined when `check` left the payment alone.
 */
export async function operateOnPayment(
  deps: PaymentOperationDependencies,
  scope: Scope,
  paymentId: string,
  operation: PaymentOperation,
  call: ApiCall | undefined,
): Promise<Operated | undefined> {
  for (;;) {
    const claim = await deps.claims.claim(
      paymentResource,
      scope,
      paymentId,
      (row) => row.attempt !== null || operation.check(row),
      call?.ctx.signal,
    );
    if (claim === undefined) return undefined;
    const left = claim.row.attempt;
    if (left === null) return deps.claims.finish(paymentResource, claim, () => makeMove(deps, claim, operation, call));
    // A crash left an attempt: settle it before anything else happens to the payment. When it is this
    // call's own (a retry), its outcome answers the call; otherwise claim again for the operation.
    const own = call !== undefined && left.requestKey !== null && left.requestKey === call.requestKey;
    const settled = await deps.claims.finish(paymentResource, claim, async () => {
      const answer = own ? await callAttempt(deps.processors, claim.row, left, operation.card) : await recallAttempt(deps.processors, left);
      return writeOutcome(deps, claim, left, answer, own ? call : undefined);
    });
    if (own) return settled;
  }
}

/** How often each instance looks for attempts left by a crash that nobody has settled. */
export const leftAttemptsIntervalMs = 1000;

/** Settles left attempts per look: at most one claim statement's worth. */
const leftAttemptsPerLook = 100;

/**
 * How long an attempt's holder must have held it before recovery, seeing the holder gone, settles
 * it. A live instance looks gone for a second or two whenever PostgreSQL restarts (its liveness
 * connection is opened again, db/liveness.ts): its calls in flight then must not be taken from it,
 * which would answer them IK_01. A crashed instance's attempts wait this long (a retry with the key
 * finishes its own at once).
 */
const holderGoneGraceMs = 5000;

/**
 * Recovery: settles the attempts that crashed operations left on payments nobody has touched since
 * (a create with confirm whose client gave up), once their claim has lapsed: released, past its
 * lease, or held by another instance that is gone and has held it for `holderGoneGraceMs`. Asks the
 * processor what each call did and writes the outcome. How many it found.
 */
export async function settleLeftAttempts(deps: PaymentOperationDependencies): Promise<number> {
  const now = deps.clock.now();
  const left = await preparedQuery<{ merchant_id: string; livemode: boolean; payment_id: string }>(
    deps.dataSource,
    `SELECT merchant_id, livemode, payment_id FROM payments AS p
      WHERE attempt IS NOT NULL
        AND (p.claim_token IS NULL OR p.claimed_until <= $1
             OR (${holderGone("p.claimed_by")} AND p.claimed_by IS DISTINCT FROM $2::integer AND p.claimed_until <= $3))
      LIMIT ${leftAttemptsPerLook}`,
    [now, holderOf(deps.dataSource), new Date(now.getTime() + claimLeaseMs - holderGoneGraceMs)],
  );
  const settleOnly: PaymentOperation = { check: () => false, move: () => undefined };
  for (const payment of left) {
    await operateOnPayment(
      deps,
      { merchantId: payment.merchant_id, livemode: payment.livemode },
      payment.payment_id,
      settleOnly,
      undefined,
    );
  }
  return left.length;
}

/** Decides the move on the claimed payment, records its attempt, calls the processor and writes the outcome. */
async function makeMove(
  deps: PaymentOperationDependencies,
  claim: Claimed<PaymentRow>,
  operation: PaymentOperation,
  call: ApiCall | undefined,
): Promise<Operated> {
  const row = claim.row;
  const previous = row.status;
  const attempt = operation.move(row);
  if (attempt === undefined) return writeChange(deps, claim, previous, [], call, {});
  const recorded = recordedFor(attempt, call);
  await recordAttempt(deps, claim, recorded, operation.alongside?.(row));
  return askProcessor(deps, claim, recorded, operation.card, call);
}

/** The attempt as it is recorded for `call`, which its retry recognises by the call's idempotency key. */
export function recordedFor(attempt: AttemptCall, call: ApiCall | undefined): StoredAttempt {
  return { ...attempt, requestKey: call?.requestKey ?? null };
}

/**
 * Once the attempt is durably recorded: keeps the call's idempotency key for its retry, makes the
 * processor call, and writes the outcome.
 */
export async function askProcessor(
  deps: PaymentOperationDependencies,
  claim: Claimed<PaymentRow>,
  recorded: StoredAttempt,
  card: CardDetails | undefined,
  call: ApiCall | undefined,
): Promise<Operated> {
  call?.ctx.values.get(responseRecorderKey)?.keepForRetry();
  failpoint("payment.recorded");
  return writeOutcome(deps, claim, recorded, await callAttempt(deps.processors, claim.row, recorded, card), call);
}

/**
 * Writes the attempt on the payment this operation holds, before the processor is asked, with the
 * fields its move set (which the outcome, its recovery's too, reads back) and what the record writes
 * besides (in one transaction then); IK_01 when the claim was lost.
 */
async function recordAttempt(
  deps: PaymentOperationDependencies,
  claim: Claimed<PaymentRow>,
  attempt: StoredAttempt,
  alongside: Alongside | undefined,
): Promise<void> {
  const { row, token } = claim;
  const record = async (em: EntityManager) => {
    await alongside?.(em);
    return preparedIn(
      em,
      `UPDATE payments SET attempt = $5, customer_id = $6, payment_method_id = $7, payment_method_type = $8, return_url = $9,
              setup_future_usage = $10, mandate_id = $11, mandate_request = $12
        WHERE merchant_id = $1 AND livemode = $2 AND payment_id = $3 AND claim_token = $4 RETURNING 1`,
      [
        row.merchantId,
        row.livemode,
        row.paymentId,
        token,
        JSON.stringify(attempt),
        row.customerId,
        row.paymentMethodId,
        row.paymentMethodType,
        row.returnUrl,
        row.setupFutureUsage,
        row.mandateId,
        row.mandateRequest === null ? null : JSON.stringify(row.mandateRequest),
      ],
    );
  };
  const written = await (alongside === undefined
    ? record(deps.dataSource.manager)
    : deps.dataSource.transaction(async (em) => {
        const rows = await record(em);
        if (rows.length === 0) throw claimLost(paymentResource.name, row.paymentId);
        return rows;
      }));
  if (written.length === 0) throw claimLost(paymentResource.name, row.paymentId);
  row.attempt = attempt;
}

/** Applies the processor's answer to the attempt (undefined: it never received the call) and writes the outcome. */
function writeOutcome(
  deps: PaymentOperationDependencies,
  claim: Claimed<PaymentRow>,
  attempt: StoredAttempt,
  answer: AttemptAnswer | undefined,
  call: ApiCall | undefined,
): Promise<Operated> {
  failpoint("payment.answered");
  const previous = claim.row.status;
  const jobs = applyAttempt(deps, claim.row, attempt, answer);
  // Settled for a request that is gone: its key gets the outcome as its answer, for its retry to replay.
  const answers = call === undefined && attempt.requestKey !== null ? attempt.requestKey : undefined;
  return writeChange(deps, claim, previous, jobs, call, { attempt, answersKey: answers });
}

/**
 * Writes the claimed payment's change, ending the claim, with what the outcome of `settled.attempt`
 * writes besides (payments/future-usage.ts): as the API call's effect (with its response as its
 * idempotency key's answer) when there is one; else, when `settled.answersKey` names the idempotency
 * key of a request that recorded the settled attempt, with the payment as that key's answer.
 */
async function writeChange(
  deps: PaymentOperationDependencies,
  claim: Claimed<PaymentRow>,
  previous: PaymentStatusWord,
  jobs: NewJob[],
  call: ApiCall | undefined,
  settled: { readonly attempt?: StoredAttempt; readonly answersKey?: string },
): Promise<Operated> {
  const row = claim.row;
  // Before the view is taken: it changes what the payment shows of its setup.
  const alongside = outcomeAlongside(deps.clock, previous, row, settled.attempt);
  const recorder = call?.ctx.values.get(responseRecorderKey);
  const answer =
    recorder !== undefined
      ? recorder.answer(paymentResource.view(row))
      : settled.answersKey === undefined
        ? undefined
        : {
            merchantId: row.merchantId,
            livemode: row.livemode,
            key: settled.answersKey,
            claimToken: null,
            response: toBinary(PaymentSchema, create(PaymentSchema, paymentResource.view(row))),
          };
  const ended = await deps.writer.writeClaimed(paymentResource, claim, previous, jobs, answer, alongside);
  const now = deps.clock.now();
  if (jobs.some((job) => job.runAt <= now)) deps.jobs.wake();
  return { row, ended: ended === "ended" };
}
