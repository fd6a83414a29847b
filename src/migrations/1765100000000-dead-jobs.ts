import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Jobs that give up (JOB_MAX_ATTEMPTS): a job that failed its last allowed attempt stays in the
 * table as dead, with its attempts and last_error, for an operator to see and retry, rather than be
 * retried every hour forever. Only pending jobs are claimed, so the due index covers those alone and
 * a pile of dead jobs never slows the runner's claim; the dead ones have an index of their own for
 * the metric and the admin list.
 */
export class DeadJobs1765100000000 implements MigrationInterface {
  name = "DeadJobs1765100000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(
      `ALTER TABLE jobs ADD COLUMN status varchar(16) NOT NULL DEFAULT 'pending' CONSTRAINT jobs_status CHECK (status IN ('pending', 'dead'))`,
    );
    await runner.query(`DROP INDEX jobs_due`);
    await runner.query(`CREATE INDEX jobs_due ON jobs (run_at) WHERE status = 'pending'`);
    await runner.query(`CREATE INDEX jobs_dead ON jobs (kind) WHERE status = 'dead'`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP INDEX jobs_dead`);
    await runner.query(`DROP INDEX jobs_due`);
    await runner.query(`CREATE INDEX jobs_due ON jobs (run_at)`);
    await runner.query(`ALTER TABLE jobs DROP COLUMN status`);
  }
}
