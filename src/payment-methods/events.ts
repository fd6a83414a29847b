import type { EntityManager } from "typeorm";
import { PaymentMethodObjectSchema } from "../../gen/paymentservice/v1/payment_method_pb.js";
import type { Clock } from "../clock.js";
import { newEvent, writeEvent } from "../events/record.js";
import type { PaymentMethodRow } from "./payment-method.entity.js";
import { toPaymentMethod } from "./view.js";

/**
 * Writes payment_method.attached or payment_method.detached (decisions §10) in the transaction of the
 * change. A payment method has no profile of its own: its events go to the profile of the payment
 * that saved it (`profileId`), else to its merchant's default profile.
 */
export async function writePaymentMethodEvent(
  em: EntityManager,
  clock: Clock,
  row: PaymentMethodRow,
  change: "attached" | "detached",
  profileId?: string,
): Promise<void> {
  const profile = profileId ?? (await defaultProfileOf(em, row.merchantId));
  const event = newEvent(
    {
      merchantId: row.merchantId,
      livemode: row.livemode,
      resource: "payment_method",
      objectId: row.paymentMethodId,
      profileId: profile,
      status: change,
      schema: PaymentMethodObjectSchema,
      view: toPaymentMethod(row),
    },
    clock,
  );
  await writeEvent(em, event);
}

async function defaultProfileOf(em: EntityManager, merchantId: string): Promise<string> {
  const [merchant] = (await em.query("SELECT default_profile_id FROM merchants WHERE merchant_id = $1", [merchantId])) as {
    default_profile_id: string;
  }[];
  return merchant!.default_profile_id;
}
