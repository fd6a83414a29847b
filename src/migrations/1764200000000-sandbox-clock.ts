import type { MigrationInterface, QueryRunner } from "typeorm";

/** The sandbox test clock's offset, shared by every instance (decisions §4). */
export class SandboxClock1764200000000 implements MigrationInterface {
  name = "SandboxClock1764200000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE sandbox_clock (id smallint PRIMARY KEY CHECK (id = 1), offset_ms bigint NOT NULL)`);
    await runner.query(`INSERT INTO sandbox_clock (id, offset_ms) VALUES (1, 0)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP TABLE sandbox_clock`);
  }
}
