import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isDatabaseUnavailable } from "../../src/db/errors.js";
import { databaseClient, poolOptions } from "../../src/db/pool.js";
import { freePort } from "../support/ports.js";
import { type PostgresCluster, startPostgresCluster } from "../support/postgres-cluster.js";
import { until } from "../support/wait.js";

/*
 * Decisions §12, item 1 of issue 43, at the level of the connections: the pools and the connections
 * of their own (a LISTEN) that every instance opens, given libpq's list of hosts. Two PostgreSQL
 * clusters of the file's own stand in for a primary and its standby: which one takes writes is
 * switched with default_transaction_read_only, which is what target_session_attrs=read-write reads
 * (libpq asks the same), so a switchover, a frozen primary and a database without a primary are made
 * at will. The failover of a real replicated pair under the service is failover.fault.ts.
 */

const timeouts = { connectTimeoutMs: 20_000, statementTimeoutMs: 1000, lockTimeoutMs: 1000, idleInTransactionTimeoutMs: 5000 };

let a: PostgresCluster;
let b: PostgresCluster;
let cases = 0;

/** Sets a server setting of `cluster` for new and open sessions alike, and waits until new sessions see it. */
async function configure(cluster: PostgresCluster, name: string, value: string): Promise<void> {
  const admin = new pg.Client({ connectionString: cluster.url(), options: "-c default_transaction_read_only=off" });
  await admin.connect();
  try {
    await admin.query(`ALTER SYSTEM SET ${name} = '${value}'`);
    await admin.query("SELECT pg_reload_conf()");
  } finally {
    await admin.end();
  }
  await until(
    `${cluster.port} ${name} = '${value}'`,
    async () => {
      const probe = new pg.Client({ connectionString: cluster.url() });
      await probe.connect();
      try {
        const { rows } = await probe.query<{ setting: string }>("SELECT current_setting($1) AS setting", [name]);
        return rows[0]!.setting === value;
      } finally {
        await probe.end();
      }
    },
    10_000,
  );
}

/** Sets whether `cluster` takes writes, with default_transaction_read_only, which is what target_session_attrs reads. */
const setWritable = (cluster: PostgresCluster, writable: boolean) =>
  configure(cluster, "default_transaction_read_only", writable ? "off" : "on");

/** A URL of its own per case: each URL has its own locator, and its application_name marks its sessions. */
function urlOf(ports: readonly number[], attrs = "read-write"): { url: string; name: string } {
  const name = `follow-${++cases}`;
  const hosts = ports.map((port) => `127.0.0.1:${port}`).join(",");
  return { url: `postgres://postgres@${hosts}/postgres?application_name=${name}&target_session_attrs=${attrs}`, name };
}

/** A pool as the service makes them, with the error listener every pool user must have. */
function openPool(url: string, max: number): pg.Pool {
  const pool = new pg.Pool(poolOptions(url, timeouts, max));
  pool.on("error", () => undefined);
  return pool;
}

/** The port of the server that answered. */
async function answeringPort(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ port: number }>("SELECT inet_server_port() AS port");
  return rows[0]!.port;
}

/** How many sessions of `name` are open on `cluster`. */
async function sessions(cluster: PostgresCluster, name: string): Promise<number> {
  const admin = new pg.Client({ connectionString: cluster.url() });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1", [
      name,
    ]);
    return rows[0]!.n;
  } finally {
    await admin.end();
  }
}

/** A write, which a read-only server refuses with 25006. */
const write = (pool: pg.Pool) => pool.query("CREATE TEMP TABLE IF NOT EXISTS t (n int)");

beforeAll(async () => {
  [a, b] = await Promise.all([startPostgresCluster(), startPostgresCluster()]);
});

afterAll(() => {
  a?.destroy();
  b?.destroy();
});

describe("a DATABASE_URL with several hosts", () => {
  it("connects to the one that takes writes, past a host that refuses connections and one that is read-only", async () => {
    await setWritable(a, false);
    await setWritable(b, true);
    const { url } = urlOf([await freePort(), a.port, b.port]);
    const pool = openPool(url, 4);
    try {
      expect(await answeringPort(pool)).toBe(b.port);
      await write(pool);
    } finally {
      await pool.end();
    }
  });

  it("follows a switchover: a write on the demoted server is refused 503-retryable, the next goes to the new primary, and the old one's connections close", async () => {
    await setWritable(a, true);
    await setWritable(b, false);
    const { url, name } = urlOf([a.port, b.port]);
    const pool = openPool(url, 4);
    try {
      // Four connections open at once, all on the primary.
      const ports = await Promise.all([1, 2, 3, 4].map(() => pool.query("SELECT inet_server_port() AS port, pg_sleep(0.05)")));
      expect(ports.map((r) => r.rows[0].port)).toEqual([a.port, a.port, a.port, a.port]);
      expect(await sessions(a, name)).toBe(4);

      await setWritable(a, false);
      await setWritable(b, true);
      const refused = await write(pool).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect((refused as { code?: string }).code).toBe("25006");
      expect(isDatabaseUnavailable(refused)).toBe(true);

      await write(pool);
      expect(await answeringPort(pool)).toBe(b.port);
      await until("the old primary's connections closed", async () => (await sessions(a, name)) === 0, 10_000);
    } finally {
      await pool.end();
    }
  });

  it("does not wait on a frozen host while another answers, and leaves a frozen primary after its read timeout", async () => {
    await setWritable(a, true);
    await setWritable(b, false);
    const { url } = urlOf([a.port, b.port]);
    const pool = openPool(url, 2);
    const fresh = urlOf([a.port, b.port]);
    const freshPool = openPool(fresh.url, 2);
    try {
      expect(await answeringPort(pool)).toBe(a.port);
      a.freeze();
      await setWritable(b, true);

      // A pool that had found nothing yet finds b while a holds its connection attempt.
      const started = Date.now();
      expect(await answeringPort(freshPool)).toBe(b.port);
      expect(Date.now() - started).toBeLessThan(timeouts.connectTimeoutMs);

      // The pool on a: its statement gets no answer, fails retryable at the read timeout, and the next goes to b.
      const unanswered = await answeringPort(pool).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(isDatabaseUnavailable(unanswered)).toBe(true);
      expect(await answeringPort(pool)).toBe(b.port);
    } finally {
      a.thaw();
      await Promise.all([pool.end(), freshPool.end()]);
    }
  });

  it("refuses, 503-retryable and naming every host, while no host takes writes; then connects once one does", async () => {
    await setWritable(a, false);
    await setWritable(b, false);
    const { url } = urlOf([a.port, b.port]);
    const pool = openPool(url, 2);
    try {
      const refused = await answeringPort(pool).then(
        () => undefined,
        (error: unknown) => error as Error,
      );
      expect(refused?.message).toMatch(/no PostgreSQL server of DATABASE_URL is usable now \(target_session_attrs=read-write\)/);
      expect(refused?.message).toContain(`127.0.0.1:${a.port} is read-only`);
      expect(refused?.message).toContain(`127.0.0.1:${b.port} is read-only`);
      expect(isDatabaseUnavailable(refused)).toBe(true);

      await setWritable(a, true);
      await until(
        "a found as the primary",
        () =>
          answeringPort(pool).then(
            (port) => port === a.port,
            () => false,
          ),
        10_000,
      );
    } finally {
      await pool.end();
    }
  });

  it("moves a connection of its own (a LISTEN) to the new primary when the pools find it", async () => {
    await setWritable(a, true);
    await setWritable(b, false);
    const { url, name } = urlOf([a.port, b.port]);
    const pool = openPool(url, 2);
    const listener = databaseClient(url, { connectionTimeoutMillis: timeouts.connectTimeoutMs });
    const lost: Error[] = [];
    listener.on("error", (error) => lost.push(error));
    try {
      await listener.connect();
      await listener.query("LISTEN events");
      expect(await sessions(a, name)).toBe(1);

      await setWritable(a, false);
      await setWritable(b, true);
      await write(pool).catch(() => undefined);
      expect(await answeringPort(pool)).toBe(b.port);
      // Its owner hears the loss and opens it again, which now goes to b.
      await until("the LISTEN connection closed", () => lost.length > 0, 10_000);
      const again = databaseClient(url, { connectionTimeoutMillis: timeouts.connectTimeoutMs });
      await again.connect();
      const { rows } = await again.query<{ port: number }>("SELECT inet_server_port() AS port");
      expect(rows[0]!.port).toBe(b.port);
      await again.end();
    } finally {
      await listener.end().catch(() => undefined);
      await pool.end();
    }
  });
});

describe("a DATABASE_URL with one host", () => {
  it("fails a commit whose wait for its synchronous standby was cancelled, 08007 and 503-retryable, which PostgreSQL reports as a success", async () => {
    await setWritable(a, true);
    const admin = new pg.Client({ connectionString: a.url() });
    await admin.connect();
    const name = `single-${++cases}`;
    const pool = openPool(`${a.url()}?application_name=${name}`, 1);
    const waiting = async () =>
      (
        await admin.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event = 'SyncRep'", [
          name,
        ])
      ).rows;
    try {
      await admin.query("CREATE TABLE unconfirmed (n int)");
      // A standby that never connects: the commit waits for it (statement_timeout does not end that
      // wait) until a cancel does, as an operator's or a tool's does when a synchronous standby is lost.
      await configure(a, "synchronous_standby_names", "standby_that_never_comes");
      const inserted = pool.query("INSERT INTO unconfirmed VALUES (1)").then(
        () => undefined,
        (error: unknown) => error as Error & { code?: string },
      );
      await until("the commit waits for its standby", async () => (await waiting()).length === 1, 2000, 20);
      await admin.query("SELECT pg_cancel_backend($1)", [(await waiting())[0]!.pid]);
      const unconfirmed = await inserted;
      expect(unconfirmed?.code).toBe("08007");
      expect(unconfirmed?.message).toContain("synchronous replication");
      expect(isDatabaseUnavailable(unconfirmed)).toBe(true);
      // The server kept it all the same: a retry with its idempotency key finds what it wrote.
      const { rows } = await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM unconfirmed");
      expect(rows[0]!.n).toBe(1);

      await configure(a, "synchronous_standby_names", "");
      await pool.query("INSERT INTO unconfirmed VALUES (2)");
    } finally {
      await configure(a, "synchronous_standby_names", "");
      await admin.end();
      await pool.end();
    }
  });

  it("connects as before, to whatever the server is; with target_session_attrs=read-write it checks, as libpq does", async () => {
    await setWritable(a, false);
    const pool = openPool(`${a.url()}?application_name=single-${++cases}`, 2);
    const checking = openPool(`${a.url()}?target_session_attrs=read-write`, 2);
    try {
      expect(await answeringPort(pool)).toBe(a.port);
      await expect(answeringPort(checking)).rejects.toThrow(
        `the PostgreSQL server at 127.0.0.1:${a.port} is read-only (target_session_attrs=read-write)`,
      );
    } finally {
      await Promise.all([pool.end(), checking.end()]);
      await setWritable(a, true);
    }
  });
});
