import type { DataSource } from "typeorm";

/** How often each instance removes the events older than the retention. */
export const eventReapIntervalMs = 60 * 60 * 1000;

/**
 * Deletes events created before `before`, a batch at a time so that no statement holds many rows
 * locked; returns how many went. Safe on several instances at once.
 */
export async function reapOldEvents(dataSource: DataSource, before: Date): Promise<number> {
  let deleted = 0;
  for (;;) {
    const [, count] = (await dataSource.query(
      `DELETE FROM events WHERE event_id = ANY (ARRAY(SELECT event_id FROM events WHERE created < $1 LIMIT 1000 FOR UPDATE SKIP LOCKED))`,
      [before],
    )) as [unknown, number];
    deleted += count;
    if (count < 1000) return deleted;
  }
}
