import type pg from "pg";
import type { Clock } from "./clock.js";

/**
 * The latest time the test clock may show. Objects take times later than their clock's (an
 * authorization's expiry, an API key's `expires_at`, a scheduled refund), and every time an answer
 * carries must lie before 10000-01-01, the end of what google.protobuf.Timestamp can be written as
 * in JSON: a clock advanced ten years at a time thousands of times would otherwise pass it and
 * make every answer that shows a new object fail.
 */
export const testClockEnd = new Date("9000-01-01T00:00:00Z");

/**
 * The sandbox test clock (SANDBOX_TEST_CLOCK=true): wall-clock time plus an offset kept in the
 * database, so advancing it moves time for every instance. Each instance re-reads the offset before
 * each job-runner pass, so another instance follows within one JOB_POLL_MS.
 */
export class SandboxTestClock implements Clock {
  private offsetMs = 0;

  /** `pool`, a pg pool rather than a data source, is also the webhook delivery thread's, which loads no TypeORM. */
  constructor(private readonly pool: pg.Pool) {}

  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }

  /** Reads the shared offset. */
  async refresh(): Promise<void> {
    const {
      rows: [row],
    } = await this.pool.query<{ offset: string }>(`SELECT offset_ms::text AS offset FROM sandbox_clock WHERE id = 1`);
    this.offsetMs = Number(row!.offset);
  }

  /**
   * Moves the shared clock forward and returns the new time; undefined, and the clock left where it
   * is, when that would take it past `testClockEnd`. The check is in the update, so advances sent
   * at once to several instances cannot pass it together.
   */
  async advance(seconds: number): Promise<Date | undefined> {
    const {
      rows: [row],
    } = await this.pool.query<{ offset: string }>(
      `UPDATE sandbox_clock SET offset_ms = offset_ms + $1 WHERE id = 1 AND $2::bigint + offset_ms + $1 <= $3::bigint
        RETURNING offset_ms::text AS offset`,
      [seconds * 1000, Date.now(), testClockEnd.getTime()],
    );
    if (row === undefined) return undefined;
    this.offsetMs = Number(row.offset);
    return this.now();
  }
}
