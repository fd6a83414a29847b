import type { DataSource, EntityManager } from "typeorm";
import type { Clock } from "../clock.js";
import { BatchedReads, findByKey } from "../db/batched-reads.js";
import type { Scope } from "../db/scope.js";
import { invalidField, notFound, preconditionFailed } from "../errors.js";
import { runLocked } from "../objects/locked-operation.js";
import { MandateRow } from "./mandate.entity.js";
import { lockMandate, mandateResource } from "./store.js";
import { mandateStates } from "./states.js";

/*
 * A merchant-initiated payment (off_session) under a mandate (decisions §10): which mandate allows it,
 * taking a single-use one so that it allows one payment whatever runs at once, and what the payment's
 * outcome does to it.
 */

/** What an off-session payment asks of its mandate. */
export interface Charge {
  readonly paymentId: string;
  readonly paymentMethodId: string;
  readonly amount: bigint;
  readonly currency: string;
}

/** What a charge needs to know of a mandate. */
export type MandateTerms = Pick<
  MandateRow,
  "mandateId" | "paymentMethodId" | "status" | "type" | "amountLimit" | "currency" | "usedByPaymentId"
>;

/** A mandate's terms as the statement below selects them. */
interface SelectedTerms {
  readonly mandate_id: string;
  readonly payment_method_id: string;
  readonly status: MandateRow["status"];
  readonly type: MandateRow["type"];
  readonly amount_limit: string | null;
  readonly currency: string | null;
  readonly used_by_payment_id: string | null;
}

/**
 * The active mandates of each payment method, newest first, read for the charges that calls make at
 * about the same time in one statement (db/batched-reads.ts): an off-session charge then costs its
 * mandate check a share of a round trip, not one of its own.
 */
const activeMandates = new BatchedReads<{ mandates: SelectedTerms[] }>(
  "payment_methods",
  "payment_method_id",
  `(SELECT coalesce(json_agg(json_build_object('mandate_id', m.mandate_id, 'payment_method_id', m.payment_method_id, 'status', m.status,
      'type', m.type, 'amount_limit', m.amount_limit::text, 'currency', m.currency, 'used_by_payment_id', m.used_by_payment_id)
      ORDER BY m.created DESC, m.mandate_id DESC), '[]')
    FROM mandates AS m WHERE m.merchant_id = t.merchant_id AND m.livemode = t.livemode AND m.payment_method_id = t.payment_method_id
      AND m.status = 'active') AS mandates`,
);

function termsOf(selected: SelectedTerms): MandateTerms {
  return {
    mandateId: selected.mandate_id,
    paymentMethodId: selected.payment_method_id,
    status: selected.status,
    type: selected.type,
    amountLimit: selected.amount_limit === null ? null : BigInt(selected.amount_limit),
    currency: selected.currency,
    usedByPaymentId: selected.used_by_payment_id,
  };
}

/** Why `mandate` does not allow `charge`, or undefined when it does. */
function refusalOf(mandate: MandateTerms, charge: Charge): string | undefined {
  if (mandate.status !== "active") return `is ${mandate.status}`;
  if (mandate.usedByPaymentId !== null && mandate.usedByPaymentId !== charge.paymentId)
    return "is single-use and was used by another payment";
  if (mandate.currency !== null && mandate.currency !== charge.currency) return `allows payments in ${mandate.currency} only`;
  if (mandate.amountLimit !== null && charge.amount > mandate.amountLimit) {
    return `allows payments of at most ${mandate.amountLimit} (smallest unit)`;
  }
  return undefined;
}

/**
 * The mandate an off-session payment is made under: `mandateId` when sent (404 naming it when it is
 * not the caller's, IR_05 when it is another payment method's), else the newest active mandate of the
 * payment method that allows the charge. IR_16 naming the field when no mandate allows it: none is
 * active, or the charge is above its limit or in another currency.
 */
export async function mandateToCharge(
  dataSource: DataSource,
  scope: Scope,
  charge: Charge,
  mandateId: string | undefined,
): Promise<MandateTerms> {
  if (mandateId !== undefined) {
    const mandate = await findByKey(dataSource.manager, MandateRow, "mandateId", scope, mandateId);
    if (mandate === undefined) throw notFound("Mandate", mandateId, "mandate_id");
    if (mandate.paymentMethodId !== charge.paymentMethodId) {
      throw invalidField("mandate_id", `it allows charging payment method ${mandate.paymentMethodId}, not ${charge.paymentMethodId}`);
    }
    const refusal = refusalOf(mandate, charge);
    if (refusal !== undefined) throw preconditionFailed(`Mandate ${mandateId} ${refusal} (field mandate_id)`);
    return mandate;
  }
  const read = await activeMandates.read(dataSource.manager, scope, charge.paymentMethodId);
  const active = (read?.mandates ?? []).map(termsOf);
  const allowing = active.find((mandate) => refusalOf(mandate, charge) === undefined);
  if (allowing !== undefined) return allowing;
  const why =
    active.length === 0
      ? "has no active mandate"
      : `has no mandate that allows this payment: ${active[0]!.mandateId} ${refusalOf(active[0]!, charge)}`;
  throw preconditionFailed(
    `Payment method ${charge.paymentMethodId} ${why}; set one up with an off-session payment (field payment_method_id)`,
  );
}

/**
 * Takes a single-use mandate for the payment, in the transaction that records the payment's attempt:
 * of concurrent payments under it, on any instances, one takes it and the others are refused (IR_16),
 * so it allows one charge. The same payment (a retry) takes it again.
 */
export async function takeMandate(em: EntityManager, scope: Scope, mandate: MandateTerms, paymentId: string): Promise<void> {
  const [, taken] = (await em.query(
    `UPDATE mandates SET used_by_payment_id = $4
      WHERE merchant_id = $1 AND livemode = $2 AND mandate_id = $3 AND status = 'active'
        AND (used_by_payment_id IS NULL OR used_by_payment_id = $4)`,
    [scope.merchantId, scope.livemode, mandate.mandateId, paymentId],
  )) as [unknown, number];
  if (taken === 0) {
    throw preconditionFailed(`Mandate ${mandate.mandateId} is single-use and was used by another payment (field mandate_id)`);
  }
}

/**
 * What an off-session payment's outcome does to the single-use mandate it took, in the outcome's
 * transaction: once charged (succeeded or authorized) the mandate is inactive, with its event; a
 * payment that charged nothing gives it back for another.
 */
export async function settleMandate(
  em: EntityManager,
  clock: Clock,
  scope: Scope,
  mandateId: string,
  paymentId: string,
  charged: boolean,
): Promise<void> {
  if (!charged) {
    await em.query(
      "UPDATE mandates SET used_by_payment_id = NULL WHERE merchant_id = $1 AND livemode = $2 AND mandate_id = $3 AND used_by_payment_id = $4 AND status = 'active'",
      [scope.merchantId, scope.livemode, mandateId, paymentId],
    );
    return;
  }
  await runLocked(em, clock, mandateResource, {
    lock: (locked) => lockMandate(locked, scope, mandateId),
    decide(row) {
      if (row.type !== "single_use" || row.usedByPaymentId !== paymentId || row.status !== "active") return "leave";
      mandateStates.move(row, "use", "inactive");
      row.updated = clock.now();
      return [];
    },
  });
}
