import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * A payment's authentication token is unique among the payments that have one, and only they are
 * indexed: most payments never wait for 3-D Secure, and each of them put a null into the index on
 * every write, which an update of the payment's status cannot skip (it is not a HOT update). A
 * lookup by token (`authentication_token = $1`) implies the index's condition.
 */
export class AuthenticationTokensWhenSet1766800000000 implements MigrationInterface {
  name = "AuthenticationTokensWhenSet1766800000000";

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(
      "CREATE UNIQUE INDEX payments_authentication_token ON payments (authentication_token) WHERE authentication_token IS NOT NULL",
    );
    await runner.query("ALTER TABLE payments DROP CONSTRAINT payments_authentication_token_key");
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query("ALTER TABLE payments ADD CONSTRAINT payments_authentication_token_key UNIQUE (authentication_token)");
    await runner.query("DROP INDEX payments_authentication_token");
  }
}
