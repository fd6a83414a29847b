import type { Claimed } from "../../objects/claims.js";
import type { Alongside } from "../../objects/writer.js";
import { responseRecorderKey } from "../../db/unit-of-work.js";
import { alreadyExists } from "../../errors.js";
import type { CardDetails } from "../../processors/processor.js";
import {
  type ApiCall,
  askProcessor,
  type Operated,
  operateOnPayment,
  type PaymentOperation,
  type PaymentOperationDependencies,
  recordedFor,
} from "../operation.js";
import type { AttemptCall, PaymentRow } from "../payment.entity.js";
import { paymentResource } from "../store.js";

/*
 * Create with confirm: true (interface §4). The payment is recorded first, in processing with its
 * authorization's attempt and held by this call, then the processor is asked, then the outcome is
 * written: the payment's first event. The API's create validates the request and makes the row
 * (service.ts); the authorization is confirm's (operations/confirm.ts).
 */

/**
 * Creates a payment confirmed at once: records it in processing with its authorization's attempt
 * (and what `alongside` writes with the record), asks the processor, writes the outcome. A retry of the API call that meets the record of its first
 * run (the same id, from its idempotency key's effect seed) finishes that run instead.
 */
export async function createConfirmed(
  deps: PaymentOperationDependencies,
  row: PaymentRow,
  attempt: AttemptCall,
  card: CardDetails,
  call: ApiCall,
  idFromSeed: boolean,
  alongside: Alongside | undefined,
): Promise<Operated> {
  const recorded = recordedFor(attempt, call);
  const held = deps.claims.newClaim();
  Object.assign(row, { status: "processing", attempt: recorded, ...held });
  const claim: Claimed<PaymentRow> = { row, token: held.claimToken };
  // Inside the claim's finish: a record whose commit lost its answer is released, so a retry need not wait out its lease.
  const created = await deps.claims.finish(paymentResource, claim, async () => {
    if ((await deps.writer.record(paymentResource, row, alongside)) === "taken") return "taken" as const;
    return askProcessor(deps, claim, recorded, card, call);
  });
  if (created !== "taken") return created;
  // The payment is this key's (its id is the key's seed): whatever the resume meets (the payment still
  // held by the first try, the database failing), the key must stay with the call for its next retry,
  // or a retry claiming it afresh would get a new seed and create a second payment.
  if (idFromSeed) call.ctx.values.get(responseRecorderKey)?.keepForRetry();
  const resumed = await operateOnPayment(deps, row, row.paymentId, resumeCreate(card, idFromSeed), call);
  return resumed!;
}

/**
 * A create with confirm that found its payment_id taken. It is a retry of the same API call when the
 * payment holds that call's attempt (finished by `operateOnPayment` before any check), or when the id
 * came from the call's effect seed: then the payment is answered as it is (recovery settled it, and
 * the call's key, in between). Otherwise the id is someone else's: HE_01.
 */
function resumeCreate(card: CardDetails, idFromSeed: boolean): PaymentOperation {
  return {
    card,
    check: (row) => {
      if (!idFromSeed) throw alreadyExists("payment", "payment_id", row.paymentId);
      return true;
    },
    move: () => undefined,
  };
}
