import { Column, Entity, PrimaryColumn } from "typeorm";
import { bigintColumn } from "../db/bigint.js";

/** A status change of an object, written in the same transaction as the change itself. */
@Entity({ name: "events" })
export class EventRow {
  @PrimaryColumn({ name: "event_id", type: "varchar", length: 64 })
  eventId!: string;

  @Column({ name: "merchant_id", type: "varchar", length: 64 })
  merchantId!: string;

  @Column({ name: "livemode", type: "boolean" })
  livemode!: boolean;

  /** "<resource>.<status>", e.g. payment.succeeded. */
  @Column({ name: "type", type: "varchar", length: 64 })
  type!: string;

  @Column({ name: "object_id", type: "varchar", length: 64 })
  objectId!: string;

  /** The business profile whose webhook_url receives the event; none on events written before webhooks. */
  @Column({ name: "profile_id", type: "varchar", length: 64, nullable: true })
  profileId!: string | null;

  /** `{object: …}`: the object as its retrieve call returns it (REST shape) at that moment. */
  @Column({ name: "data", type: "jsonb" })
  data!: { object: unknown };

  @Column({ name: "created", type: "timestamptz" })
  created!: Date;

  /**
   * Where the event stands among those of its transaction, assigned by the database as it is written.
   * Events are ordered by the transaction that wrote them (the column `txid`, which only SQL reads),
   * then by seq (docs/events.md), so that a stream can tell which events can no longer be overtaken.
   */
  @Column({
    name: "seq",
    type: "bigint",
    generated: "identity",
    generatedIdentity: "ALWAYS",
    insert: false,
    update: false,
    transformer: bigintColumn,
  })
  seq!: bigint;
}
