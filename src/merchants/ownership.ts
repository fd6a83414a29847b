import type { EntityManager } from "typeorm";
import { notFound, type ApiError } from "../errors.js";
import { ProfileRow } from "./profile.entity.js";

/** The references a new object carries that must belong to its merchant (decisions §4). */
export interface OwnedReferences {
  readonly merchantId: string;
  readonly livemode: boolean;
  readonly profileId: string;
  readonly customerId: string | null;
}

/**
 * The SQL condition that a new row's profile and customer (when it names one) belong to its merchant,
 * on the row of table `alias`: it guards the statement that writes the new object, so the check
 * costs no extra round trip and cannot race a customer's deletion.
 */
export function ownershipGuard(alias: string): string {
  return (
    `EXISTS (SELECT 1 FROM profiles WHERE profiles.merchant_id = ${alias}.merchant_id AND profiles.profile_id = ${alias}.profile_id) AND ` +
    `(${alias}.customer_id IS NULL OR EXISTS (SELECT 1 FROM customers WHERE customers.merchant_id = ${alias}.merchant_id ` +
    `AND customers.livemode = ${alias}.livemode AND customers.customer_id = ${alias}.customer_id AND customers.deleted_at IS NULL))`
  );
}

/** After the guard stopped a write: the 404 naming the field that does not belong (profile first). */
export async function ownershipError(em: EntityManager, refs: OwnedReferences): Promise<ApiError> {
  if (!(await em.existsBy(ProfileRow, { merchantId: refs.merchantId, profileId: refs.profileId }))) {
    return notFound("Profile", refs.profileId, "profile_id");
  }
  return notFound("Customer", refs.customerId ?? "", "customer_id");
}
