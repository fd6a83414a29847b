import { describe, expect, it } from "vitest";
import { spawnServer } from "../support/server-process.js";

/*
 * The configuration is checked before anything opens (docs/operations.md, "Configuration checks"):
 * a server given unusable values exits 1 at once, and its log says which variables and what they
 * expect, with no secret in it. src/config.spec.ts covers each rule.
 */

describe("a server started with unusable settings", () => {
  it("exits 1 before listening, naming every bad variable and repeating no secret", async () => {
    const started = spawnServer({
      DATABASE_URL: "mysql://root:hunter2-db-password@db/payments",
      ADMIN_API_KEY: "hunter2-admin",
      DATA_ENCRYPTION_KEY: "hunter2-data-key",
    });
    const error: Error = await started.then(
      () => {
        throw new Error("the server started");
      },
      (refused: Error) => refused,
    );
    expect(error.message).toMatch(/^the server exited \(1\) before listening:/);
    const log = error.message.slice(error.message.indexOf("\n") + 1);
    const startFailed = JSON.parse(log.split("\n").find((line) => line.includes('"start failed"'))!) as { level: string; error: string };
    expect(startFailed.level).toBe("error");
    expect(startFailed.error).toBe(
      [
        "invalid configuration: DATABASE_URL must be a postgres:// or postgresql:// URL, e.g. postgres://user:password@host:5432/database (the value set is a mysql:// URL)",
        "ADMIN_API_KEY must be at least 16 characters (the value set has 13), e.g. the output of `openssl rand -hex 32`",
        "DATA_ENCRYPTION_KEY must be exactly 64 hex digits (32 bytes), e.g. the output of `openssl rand -hex 32` (the value set has 16 characters, not all hex digits)",
      ].join("; "),
    );
    expect(log).not.toContain("hunter2");
  });

  it("names both shared secrets when DATABASE_URL comes without them, in the one line", async () => {
    const error: Error = await spawnServer({
      DATABASE_URL: "postgres://payments@127.0.0.1:1/payments",
      API_KEY_HASH_SECRET: "",
      DATA_ENCRYPTION_KEY: "",
    }).then(
      () => {
        throw new Error("the server started");
      },
      (refused: Error) => refused,
    );
    const failures = error.message.split("\n").filter((line) => line.includes('"start failed"'));
    expect(failures, error.message).toHaveLength(1);
    const { error: reason } = JSON.parse(failures[0]!) as { error: string };
    expect(reason).toMatch(
      /^invalid configuration: API_KEY_HASH_SECRET must be set when DATABASE_URL is set .*; DATA_ENCRYPTION_KEY must be set when DATABASE_URL is set /,
    );
  });
});
