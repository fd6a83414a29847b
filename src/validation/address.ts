import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Address, AddressSchema } from "../../gen/paymentservice/v1/common_pb.js";
import { country, text } from "./fields.js";

/** Postal address as stored in jsonb columns, keyed by the API's snake_case names. */
export interface AddressJson {
  line1?: string;
  line2?: string;
  city?: string;
  state?: string;
  postal_code?: string;
  country?: string;
}

/**
 * Validates an address (field names prefixed with `field`, e.g. `address.country`) and returns what
 * to store: only the parts sent, or null when nothing was sent.
 */
export function addressToStore(field: string, address: Address): AddressJson | null {
  const stored: AddressJson = {};
  const put = (key: keyof AddressJson, value: string | undefined) => {
    if (value !== undefined && value !== "") stored[key] = value;
  };
  put("line1", text(`${field}.line1`, address.line1, 200));
  put("line2", text(`${field}.line2`, address.line2, 200));
  put("city", text(`${field}.city`, address.city, 100));
  put("state", text(`${field}.state`, address.state, 100));
  put("postal_code", text(`${field}.postal_code`, address.postalCode, 20));
  put("country", address.country === "" ? undefined : country(`${field}.country`, address.country));
  return Object.keys(stored).length === 0 ? null : stored;
}

/** The API view of a stored address. */
export function addressFromStore(stored: AddressJson | null): MessageInitShape<typeof AddressSchema> | undefined {
  if (stored === null) return undefined;
  return {
    line1: stored.line1,
    line2: stored.line2,
    city: stored.city,
    state: stored.state,
    postalCode: stored.postal_code,
    country: stored.country,
  };
}
