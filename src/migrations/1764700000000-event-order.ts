import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * A total order of events (docs/events.md): `seq` is assigned as each event is written, so events
 * written in one instant (an instant refund's pending and succeeded) still list in the order they
 * happened, and pages never skip or repeat one. Lists read it newest first. Old events are removed
 * by age (src/events/retention.ts).
 */
export class EventOrder1764700000000 implements MigrationInterface {
  name = "EventOrder1764700000000";

  async up(runner: QueryRunner): Promise<void> {
    // Events written before this migration are numbered by time (ties by id: which happened first
    // was never recorded), not in the order PostgreSQL happens to store them; new ones as written.
    await runner.query(`ALTER TABLE events ADD COLUMN seq bigint`);
    await runner.query(`
      UPDATE events SET seq = ordered.n
        FROM (SELECT event_id, row_number() OVER (ORDER BY created, event_id) AS n FROM events) AS ordered
       WHERE events.event_id = ordered.event_id`);
    await runner.query(`ALTER TABLE events ALTER COLUMN seq SET NOT NULL`);
    await runner.query(`ALTER TABLE events ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY`);
    await runner.query(`SELECT setval(pg_get_serial_sequence('events', 'seq'), coalesce(max(seq), 0) + 1, false) FROM events`);
    await runner.query(`DROP INDEX events_list`);
    await runner.query(`CREATE INDEX events_list ON events (merchant_id, livemode, seq DESC)`);
    // The retention reaper finds old events by their age.
    await runner.query(`CREATE INDEX events_created ON events (created)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP INDEX events_created`);
    await runner.query(`DROP INDEX events_list`);
    await runner.query(`CREATE INDEX events_list ON events (merchant_id, livemode, created DESC, event_id DESC)`);
    await runner.query(`ALTER TABLE events DROP COLUMN seq`);
  }
}
