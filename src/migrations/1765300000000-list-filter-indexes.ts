import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Indexes for the list filters a grown database would otherwise answer by reading every row of the
 * merchant (docs/performance.md, "Grown database"): each list counts its matches exactly, so without
 * an index on the filter the count visits the heap row of each of the merchant's objects. Each index
 * leads with the merchant and environment, then the filter, then the list's order, so both the page
 * and the count are one range of it. `IF NOT EXISTS`: on a database that is already large, an operator
 * builds them beforehand with `CREATE INDEX CONCURRENTLY` (same definitions) and this migration then
 * finds them in place instead of blocking writes while it builds them.
 */
export class ListFilterIndexes1765300000000 implements MigrationInterface {
  name = "ListFilterIndexes1765300000000";

  async up(runner: QueryRunner): Promise<void> {
    for (const definition of indexes) await runner.query(`CREATE INDEX IF NOT EXISTS ${definition}`);
  }

  async down(runner: QueryRunner): Promise<void> {
    for (const definition of indexes) await runner.query(`DROP INDEX IF EXISTS ${definition.split(" ")[0]}`);
  }
}

/** The indexes, as `name ON table (…)`. */
const indexes = [
  "payments_customer ON payments (merchant_id, livemode, customer_id, created DESC, payment_id DESC) WHERE customer_id IS NOT NULL",
  "payments_status ON payments (merchant_id, livemode, status, created DESC, payment_id DESC)",
  "refunds_status ON refunds (merchant_id, livemode, status, created DESC, refund_id DESC)",
  "events_type ON events (merchant_id, livemode, type, txid DESC, seq DESC)",
  "customers_email ON customers (merchant_id, livemode, email) WHERE deleted_at IS NULL",
  // A final status deletes the object's pending jobs (src/db/follow-ups.ts) on the request's path.
  "jobs_object ON jobs (merchant_id, livemode, object_id)",
];
