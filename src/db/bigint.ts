import type { ValueTransformer } from "typeorm";

/** pg returns bigint columns as strings; amounts are bigint in the API types, so convert at the entity edge. */
export const bigintColumn: ValueTransformer = {
  to: (value: bigint | null | undefined) => (value === null || value === undefined ? value : value.toString()),
  from: (value: string | null) => (value === null ? null : BigInt(value)),
};
