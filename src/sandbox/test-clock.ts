import type { DataSource } from "typeorm";
import type { Clock } from "../clock.js";
import { preparedQuery } from "../db/prepared.js";

/**
 * The sandbox test clock (SANDBOX_TEST_CLOCK=true): wall-clock time plus an offset kept in the
 * database, so advancing it moves time for every instance. Each instance re-reads the offset before
 * each job-runner pass, so another instance follows within one JOB_POLL_MS.
 */
export class SandboxTestClock implements Clock {
  private offsetMs = 0;

  constructor(private readonly dataSource: DataSource) {}

  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }

  /** Reads the shared offset. */
  async refresh(): Promise<void> {
    const [row] = await preparedQuery<{ offset: string }>(
      this.dataSource,
      `SELECT offset_ms::text AS offset FROM sandbox_clock WHERE id = 1`,
      [],
    );
    this.offsetMs = Number(row!.offset);
  }

  /** Moves the shared clock forward and returns the new time. */
  async advance(seconds: number): Promise<Date> {
    const [row] = await preparedQuery<{ offset: string }>(
      this.dataSource,
      `UPDATE sandbox_clock SET offset_ms = offset_ms + $1 WHERE id = 1 RETURNING offset_ms::text AS offset`,
      [seconds * 1000],
    );
    this.offsetMs = Number(row!.offset);
    return this.now();
  }
}
