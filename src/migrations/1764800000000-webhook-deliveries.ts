import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Webhook delivery (docs/events.md). Each event names the profile whose webhook_url receives it, so
 * refunds and disputes now record their payment's profile like payments and payouts do. A delivery
 * is a row written in the same statement as its event when that profile has a webhook_url: the
 * durable job the dispatcher works through, and the delivery state the event shows. A profile keeps
 * its previous webhook secret for a while after a rotation, so deliveries carry both signatures.
 *
 * Events are ordered by the transaction that wrote them, then by `seq` within it (docs/events.md):
 * every transaction below the oldest one still running has ended, so a stream that reads only
 * those never passes an event that commits later. Each committed insert of events wakes the streams
 * of every instance through NOTIFY.
 */
export class WebhookDeliveries1764800000000 implements MigrationInterface {
  name = "WebhookDeliveries1764800000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE events ADD COLUMN profile_id varchar(64)`);
    // Events written before this migration keep their order among themselves, before every later one.
    await runner.query(`ALTER TABLE events ADD COLUMN txid xid8 NOT NULL DEFAULT '0'`);
    await runner.query(`ALTER TABLE events ALTER COLUMN txid SET DEFAULT pg_current_xact_id()`);
    await runner.query(`DROP INDEX events_list`);
    await runner.query(`CREATE INDEX events_list ON events (merchant_id, livemode, txid DESC, seq DESC)`);
    await runner.query(`
      CREATE FUNCTION notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF EXISTS (SELECT 1 FROM inserted) THEN
          PERFORM pg_notify('events', '');
        END IF;
        RETURN NULL;
      END $$`);
    await runner.query(
      `CREATE TRIGGER events_notify AFTER INSERT ON events REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION notify_events()`,
    );
    for (const table of ["refunds", "disputes"]) {
      await runner.query(`ALTER TABLE ${table} ADD COLUMN profile_id varchar(64)`);
      await runner.query(`
        UPDATE ${table} AS t SET profile_id = p.profile_id FROM payments AS p
         WHERE p.merchant_id = t.merchant_id AND p.livemode = t.livemode AND p.payment_id = t.payment_id`);
      await runner.query(`ALTER TABLE ${table} ALTER COLUMN profile_id SET NOT NULL`);
    }
    await runner.query(`ALTER TABLE profiles ADD COLUMN previous_webhook_secret text`);
    await runner.query(`ALTER TABLE profiles ADD COLUMN previous_webhook_secret_until timestamptz`);
    await runner.query(`
      CREATE TABLE webhook_deliveries (
        event_id varchar(64) PRIMARY KEY REFERENCES events (event_id) ON DELETE CASCADE,
        merchant_id varchar(64) NOT NULL,
        livemode boolean NOT NULL,
        profile_id varchar(64) NOT NULL,
        status varchar(16) NOT NULL,
        attempts integer NOT NULL,
        window_attempts integer NOT NULL DEFAULT 0,
        last_response_status integer,
        last_error text,
        last_attempt_at timestamptz,
        next_attempt_at timestamptz,
        deliver_until timestamptz NOT NULL,
        leased_until timestamptz,
        created timestamptz NOT NULL
      )`);
    // The dispatcher looks for the oldest due deliveries.
    await runner.query(`CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE webhook_deliveries`);
    await runner.query(`ALTER TABLE profiles DROP COLUMN previous_webhook_secret_until`);
    await runner.query(`ALTER TABLE profiles DROP COLUMN previous_webhook_secret`);
    await runner.query(`ALTER TABLE disputes DROP COLUMN profile_id`);
    await runner.query(`ALTER TABLE refunds DROP COLUMN profile_id`);
    await runner.query(`DROP TRIGGER events_notify ON events`);
    await runner.query(`DROP FUNCTION notify_events()`);
    await runner.query(`DROP INDEX events_list`);
    await runner.query(`CREATE INDEX events_list ON events (merchant_id, livemode, seq DESC)`);
    await runner.query(`ALTER TABLE events DROP COLUMN txid`);
    await runner.query(`ALTER TABLE events DROP COLUMN profile_id`);
  }
}
