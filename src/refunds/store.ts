import type { EntityManager } from "typeorm";
import { lostStatuses, openStatuses } from "../disputes/states.js";
import { preconditionFailed } from "../errors.js";
import { RefundSchema } from "../../gen/paymentservice/v1/refund_pb.js";
import type { Clock } from "../clock.js";
import { writeNewObject } from "../db/new-objects.js";
import { preparedIn } from "../db/prepared.js";
import { writeObjectChange, type Resource, type Scope } from "../db/resource.js";
import type { NewJob } from "../jobs/runner.js";
import { RefundRow, type RefundStatusWord } from "./refund.entity.js";
import { countedStatuses, refundStates } from "./states.js";
import { toRefund } from "./view.js";

/** How refunds are stored and reported. */
export const refundResource: Resource<RefundRow, typeof RefundSchema> = {
  name: "refund",
  label: "Refund",
  entity: RefundRow,
  idProperty: "refundId",
  schema: RefundSchema,
  view: toRefund,
  states: refundStates,
};

/** Writes a new refund, its refund.pending event and its processing job in one statement. */
export async function writeNewRefund(em: EntityManager, clock: Clock, row: RefundRow, jobs: NewJob[]): Promise<void> {
  await writeNewObject(em, clock, refundResource, row, jobs);
}

/** Writes a change to a locked refund, with the event of a new status and the end of its jobs once final. */
export function writeRefundChange(em: EntityManager, clock: Clock, row: RefundRow, previous: RefundStatusWord): Promise<void> {
  return writeObjectChange(em, clock, refundResource, row, previous);
}

/** What `refundable` reads of a payment's refunds and disputes. */
interface Sums {
  refunded: string;
  lost: string;
  disputed: boolean;
}

/**
 * What is still refundable on a payment whose row the caller has locked: what was captured minus the
 * refunds that are pending, succeeded or in manual review, minus disputes the merchant lost or
 * accepted (decisions §4). An undecided dispute blocks refunds: its money may still go to the
 * cardholder. The payment lock is what makes concurrent refunds and dispute decisions see each other.
 */
export async function refundable(em: EntityManager, scope: Scope, paymentId: string, received: bigint): Promise<bigint> {
  const [{ refunded, lost, disputed }] = (await preparedIn<Sums>(
    em,
    `SELECT (SELECT coalesce(sum(amount), 0) FROM refunds
              WHERE merchant_id = $1 AND livemode = $2 AND payment_id = $3 AND status = ANY($4))::text AS refunded,
            (SELECT coalesce(sum(amount), 0) FROM disputes
              WHERE merchant_id = $1 AND livemode = $2 AND payment_id = $3 AND status = ANY($5))::text AS lost,
            EXISTS (SELECT 1 FROM disputes
              WHERE merchant_id = $1 AND livemode = $2 AND payment_id = $3 AND status = ANY($6)) AS disputed`,
    [scope.merchantId, scope.livemode, paymentId, countedStatuses, lostStatuses, openStatuses],
  )) as [Sums];
  if (disputed) {
    throw preconditionFailed("This payment has an open dispute; it can be refunded once the dispute is decided");
  }
  const left = received - BigInt(refunded) - BigInt(lost);
  return left > 0n ? left : 0n;
}
