import type { EntityManager } from "typeorm";
import type { Statement } from "../db/statement.js";
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
 * The SQL condition that the profile and the customer (when one is named) belong to the merchant:
 * it guards the statement that writes the new object, so the check costs no extra round trip and
 * cannot race a customer's deletion.
 */
export function ownershipGuard(statement: Statement, refs: OwnedReferences): string {
  const merchant = statement.param(refs.merchantId, "varchar");
  const customer = statement.param(refs.customerId, "varchar");
  return (
    `EXISTS (SELECT 1 FROM profiles WHERE merchant_id = ${merchant} AND profile_id = ${statement.param(refs.profileId, "varchar")}) AND ` +
    `(${customer} IS NULL OR EXISTS (SELECT 1 FROM customers WHERE merchant_id = ${merchant} ` +
    `AND livemode = ${statement.param(refs.livemode, "boolean")} AND customer_id = ${customer} AND deleted_at IS NULL))`
  );
}

/** After the guard stopped a write: the 404 naming the field that does not belong (profile first). */
export async function ownershipError(em: EntityManager, refs: OwnedReferences): Promise<ApiError> {
  if (!(await em.existsBy(ProfileRow, { merchantId: refs.merchantId, profileId: refs.profileId }))) {
    return notFound("Profile", refs.profileId, "profile_id");
  }
  return notFound("Customer", refs.customerId ?? "", "customer_id");
}
