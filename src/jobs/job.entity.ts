import { Column, Entity, PrimaryGeneratedColumn } from "typeorm";

/** Work due at a time (capture, expiry, …), kept in the database so any instance may run it and a restart loses none. */
@Entity({ name: "jobs" })
export class JobRow {
  @PrimaryGeneratedColumn({ name: "job_id", type: "bigint" })
  jobId!: string;

  /** What to do, e.g. payment.capture_scheduled; the runner's handler of that name does it. */
  @Column({ name: "kind", type: "varchar", length: 64 })
  kind!: string;

  @Column({ name: "merchant_id", type: "varchar", length: 64 })
  merchantId!: string;

  @Column({ name: "livemode", type: "boolean" })
  livemode!: boolean;

  @Column({ name: "object_id", type: "varchar", length: 64 })
  objectId!: string;

  @Column({ name: "run_at", type: "timestamptz" })
  runAt!: Date;

  @Column({ name: "attempts", type: "integer" })
  attempts!: number;

  @Column({ name: "last_error", type: "text", nullable: true })
  lastError!: string | null;

  @Column({ name: "created", type: "timestamptz" })
  created!: Date;
}
