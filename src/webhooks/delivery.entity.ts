import { Column, Entity, PrimaryColumn } from "typeorm";

/** Where an event's delivery to its profile's webhook_url stands. */
export type DeliveryStatusWord = "pending" | "delivered" | "failed";

/**
 * The delivery of one event to its profile's webhook_url: written in the same statement as the event
 * (when the profile has a webhook_url then), so no event is ever left undelivered, and kept with it as
 * the delivery state the event shows. The dispatcher (./dispatcher.ts) works through the pending ones.
 */
@Entity({ name: "webhook_deliveries" })
export class DeliveryRow {
  @PrimaryColumn({ name: "event_id", type: "varchar", length: 64 })
  eventId!: string;

  @Column({ name: "merchant_id", type: "varchar", length: 64 })
  merchantId!: string;

  @Column({ name: "livemode", type: "boolean" })
  livemode!: boolean;

  @Column({ name: "profile_id", type: "varchar", length: 64 })
  profileId!: string;

  @Column({ name: "status", type: "varchar", length: 16 })
  status!: DeliveryStatusWord;

  @Column({ name: "attempts", type: "integer" })
  attempts!: number;

  /** Attempts since the retry window began (a redelivery begins a new one): they set the next wait. */
  @Column({ name: "window_attempts", type: "integer" })
  windowAttempts!: number;

  /** The HTTP status of the last answer; null when no attempt got one (timeout, refused connection). */
  @Column({ name: "last_response_status", type: "integer", nullable: true })
  lastResponseStatus!: number | null;

  /** Why the last attempt failed, in words; null after a success. */
  @Column({ name: "last_error", type: "text", nullable: true })
  lastError!: string | null;

  @Column({ name: "last_attempt_at", type: "timestamptz", nullable: true })
  lastAttemptAt!: Date | null;

  /** When a pending delivery is tried next; null once delivered or failed. */
  @Column({ name: "next_attempt_at", type: "timestamptz", nullable: true })
  nextAttemptAt!: Date | null;

  /** The end of the retry window: a delivery still failing then is marked failed. */
  @Column({ name: "deliver_until", type: "timestamptz" })
  deliverUntil!: Date;

  /** Set while an instance is sending it: no other instance takes it before then (the claim's token). */
  @Column({ name: "leased_until", type: "timestamptz", nullable: true })
  leasedUntil!: Date | null;

  @Column({ name: "created", type: "timestamptz" })
  created!: Date;
}
