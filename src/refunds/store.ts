import type { EntityManager } from "typeorm";
import { RefundSchema } from "../../gen/paymentservice/v1/refund_pb.js";
import { objectBusy, unclaimedSql } from "../objects/claims.js";
import { BatchedReads } from "../db/batched-reads.js";
import type { Resource } from "../objects/resource.js";
import { objectKey, type Scope } from "../db/scope.js";
import { notFound, preconditionFailed, refundExceedsCaptured } from "../errors.js";
import type { PaymentStatusWord } from "../payments/payment.entity.js";
import { paymentStates } from "../payments/states.js";
import { RefundRow } from "./refund.entity.js";
import { refundStates } from "./states.js";
import { toRefund } from "./view.js";

/** The payment statuses a refund may be taken from, as an SQL list. */
const refundableStatuses = paymentStates.transitions.refund.from.map((status) => `'${status}'`).join(", ");

/**
 * Whether a new refund (the table `alias`) may be written, checked on its payment's row, which the
 * check locks: the payment may be refunded (its status, no undecided dispute, no operation holding it)
 * and has at least the refund's amount left. Everything checked lives on that row, where triggers keep
 * what the payment's refunds and disputes hold back (migration RefundHolds): a refund that waits for
 * another's lock is checked again on the row as the other left it.
 */
function refundableGuard(alias: string): string {
  return (
    `EXISTS (SELECT 1 FROM payments AS p WHERE p.merchant_id = ${alias}.merchant_id AND p.livemode = ${alias}.livemode ` +
    `AND p.payment_id = ${alias}.payment_id AND p.status IN (${refundableStatuses}) AND p.disputes_open = 0 ` +
    `AND ${unclaimedSql("p", `${alias}.created`)} ` +
    `AND ${alias}.amount <= coalesce(p.amount_received, 0) - p.amount_unrefundable FOR UPDATE OF p)`
  );
}

/** How refunds are stored and reported. */
export const refundResource: Resource<RefundRow, typeof RefundSchema> = {
  name: "refund",
  label: "Refund",
  entity: RefundRow,
  idProperty: "refundId",
  schema: RefundSchema,
  view: toRefund,
  states: refundStates,
  movements: (row, previous) => (row.status === "succeeded" && previous !== "succeeded" ? [{ type: "refund", amount: -row.amount }] : []),
  guard: refundableGuard,
  refusal: async (em, row) => {
    const { left } = await refundablePayment(em, row, row.paymentId, row.created);
    if (row.amount <= left) throw objectBusy(`payment ${row.paymentId} changed while the refund was written`);
    return refundExceedsCaptured(row.amount, left);
  },
  // The guard reads the payment's row as the statement began: two refunds of one payment in one
  // statement would both pass it.
  batchKey: (row) => objectKey(row, row.paymentId),
};

/** What `refundablePayment` reads of a payment. */
interface Refundable {
  status: PaymentStatusWord;
  profile_id: string;
  currency: string;
  received: string | null;
  unrefundable: string;
  disputes_open: number;
  claimed: boolean;
}

/** Payments as a new refund reads them, batched with other calls' reads. */
const refundables = new BatchedReads<Refundable>(
  "payments",
  "payment_id",
  `t.status, t.profile_id, t.currency, t.amount_received::text AS received, t.amount_unrefundable::text AS unrefundable,
   t.disputes_open, NOT ${unclaimedSql("t", "k.at")} AS claimed`,
);

/** What a new refund takes from its payment: the amount still refundable, and the profile and currency it inherits. */
export interface RefundablePayment {
  readonly left: bigint;
  readonly profileId: string;
  readonly currency: string;
}

/**
 * What is still refundable on a payment: what was captured minus its refunds that are pending,
 * succeeded or in manual review, minus its disputes the merchant lost or accepted (decisions §4).
 * Throws what stops any refund: no such payment (404), a status that cannot be refunded (IR_14), an
 * undecided dispute (its money may still go to the cardholder), or an operation holding the payment
 * at `now` (retried once it may be gone, inside `waitingForClaims`). A read, not a lock: the refund's
 * own statement checks again on the locked row.
 */
export async function refundablePayment(em: EntityManager, scope: Scope, paymentId: string, now: Date): Promise<RefundablePayment> {
  const payment = await refundables.read(em, scope, paymentId, now);
  if (payment === undefined) throw notFound("Payment", paymentId, "payment_id");
  if (payment.claimed) throw objectBusy(`payment ${paymentId} is claimed`);
  paymentStates.guard("refund", payment.status);
  if (payment.disputes_open > 0) {
    throw preconditionFailed("This payment has an open dispute; it can be refunded once the dispute is decided");
  }
  const left = BigInt(payment.received ?? 0) - BigInt(payment.unrefundable);
  return { left: left > 0n ? left : 0n, profileId: payment.profile_id, currency: payment.currency };
}
