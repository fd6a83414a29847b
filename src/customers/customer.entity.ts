import { Column, Entity, PrimaryColumn } from "typeorm";
import type { AddressJson } from "../validation/address.js";

/** A merchant's customer. Deleting keeps the row (deleted_at) so the id stays reserved. */
@Entity({ name: "customers" })
export class CustomerRow {
  @PrimaryColumn({ name: "merchant_id", type: "varchar", length: 64 })
  merchantId!: string;

  @PrimaryColumn({ name: "customer_id", type: "varchar", length: 64 })
  customerId!: string;

  /** Part of the key: sandbox and production are separate id spaces, neither can see the other. */
  @PrimaryColumn({ name: "livemode", type: "boolean" })
  livemode!: boolean;

  @Column({ name: "email", type: "text", nullable: true })
  email!: string | null;

  @Column({ name: "name", type: "text", nullable: true })
  name!: string | null;

  @Column({ name: "phone", type: "text", nullable: true })
  phone!: string | null;

  @Column({ name: "phone_country_code", type: "text", nullable: true })
  phoneCountryCode!: string | null;

  @Column({ name: "description", type: "text", nullable: true })
  description!: string | null;

  @Column({ name: "address", type: "jsonb", nullable: true })
  address!: AddressJson | null;

  @Column({ name: "metadata", type: "jsonb" })
  metadata!: Record<string, string>;

  @Column({ name: "created", type: "timestamptz" })
  created!: Date;

  @Column({ name: "updated", type: "timestamptz" })
  updated!: Date;

  @Column({ name: "deleted_at", type: "timestamptz", nullable: true })
  deletedAt!: Date | null;
}
