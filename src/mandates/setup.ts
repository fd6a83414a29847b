import type { EntityManager } from "typeorm";
import type { Clock } from "../clock.js";
import { writeNewObject } from "../objects/writer.js";
import { MandateRow, type StoredMandateRequest } from "./mandate.entity.js";
import { mandateResource } from "./store.js";

/** The off-session setup a mandate comes from: the succeeded payment and the card it saved. */
export interface SetupPayment {
  readonly merchantId: string;
  readonly livemode: boolean;
  readonly profileId: string;
  readonly customerId: string;
  readonly paymentMethodId: string;
  /** The id the payment announced for the mandate when it was recorded. */
  readonly mandateId: string;
}

/**
 * Writes the mandate an off-session setup asked for, active, with its mandate.active event, in the
 * transaction that writes the setup's success.
 */
export async function writeSetupMandate(
  em: EntityManager,
  clock: Clock,
  setup: SetupPayment,
  request: StoredMandateRequest,
): Promise<void> {
  const now = clock.now();
  const row = Object.assign(new MandateRow(), {
    merchantId: setup.merchantId,
    livemode: setup.livemode,
    mandateId: setup.mandateId,
    profileId: setup.profileId,
    customerId: setup.customerId,
    paymentMethodId: setup.paymentMethodId,
    status: "active",
    type: request.type,
    amountLimit: request.amount_limit === null ? null : BigInt(request.amount_limit),
    currency: request.currency,
    customerAcceptance: request.customer_acceptance,
    usedByPaymentId: null,
    created: now,
    updated: now,
  } satisfies MandateRow);
  await writeNewObject(em, clock, mandateResource, row, []);
}
