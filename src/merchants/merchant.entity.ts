import { Column, Entity, PrimaryColumn } from "typeorm";

/** A business that takes payments through the service; owns profiles, keys and every object. */
@Entity({ name: "merchants" })
export class MerchantRow {
  @PrimaryColumn({ name: "merchant_id", type: "varchar", length: 64 })
  merchantId!: string;

  @Column({ name: "merchant_name", type: "text", nullable: true })
  merchantName!: string | null;

  @Column({ name: "default_profile_id", type: "varchar", length: 64 })
  defaultProfileId!: string;

  @Column({ name: "created", type: "timestamptz" })
  created!: Date;
}
