import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * The tables of deltas (`list_counts`, `balance_totals`; src/db/deltas.ts) are vacuumed after every
 * merge, every 2 s, and their last pages are empty after each: a vacuum then truncated them, which
 * takes the table's ACCESS EXCLUSIVE lock (retrying for it while writers hold theirs), and every
 * statement writing a payment's counts or its balance transaction's delta queued behind it while it
 * held it (43 ms a vacuum of `balance_totals` under load on a fresh database). The next deltas fill
 * those pages again seconds later, so they are kept: no vacuum of these tables truncates them, the
 * runner's or autovacuum's.
 */
export class DeltaTablesKeepPages1766500000000 implements MigrationInterface {
  name = "DeltaTablesKeepPages1766500000000";

  async up(runner: QueryRunner): Promise<void> {
    for (const table of deltaTables) await runner.query(`ALTER TABLE ${table} SET (vacuum_truncate = false)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    for (const table of deltaTables) await runner.query(`ALTER TABLE ${table} RESET (vacuum_truncate)`);
  }
}

/** The tables of deltas when this migration was written. */
const deltaTables = ["list_counts", "balance_totals"];
