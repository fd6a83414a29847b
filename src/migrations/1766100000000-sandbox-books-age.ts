import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * The sandbox processor's books are reaped once a week old (processors/sandbox-books.ts): an index on
 * their age, so that each instance's upkeep finds what to remove without reading the table.
 */
export class SandboxBooksAge1766100000000 implements MigrationInterface {
  name = "SandboxBooksAge1766100000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query("CREATE INDEX sandbox_processor_calls_created ON sandbox_processor_calls (created)");
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query("DROP INDEX sandbox_processor_calls_created");
  }
}
