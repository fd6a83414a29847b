import { Column, Entity, PrimaryGeneratedColumn } from "typeorm";

/** Where a job stands; the runner claims pending jobs only. */
export type JobStatus = "pending" | "dead";

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

  /** When a pending job runs next, or the end of its lease while a runner holds it; when a dead job died. */
  @Column({ name: "run_at", type: "timestamptz" })
  runAt!: Date;

  /** pending until the job fails its last allowed attempt (JOB_MAX_ATTEMPTS), then dead: kept, never claimed, until an operator retries it. */
  @Column({ name: "status", type: "varchar", length: 16 })
  status!: JobStatus;

  @Column({ name: "attempts", type: "integer" })
  attempts!: number;

  @Column({ name: "last_error", type: "text", nullable: true })
  lastError!: string | null;

  @Column({ name: "created", type: "timestamptz" })
  created!: Date;
}
