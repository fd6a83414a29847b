import { execFile, execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { freePort } from "./ports.js";

const run = promisify(execFile);

/*
 * A PostgreSQL cluster of a test's own, on a free loopback port, that the test may restart, stop and
 * freeze: the shared server on 5432 serves everyone else and must never be touched. It runs as the
 * `postgres` OS user (initdb and postgres refuse root) with fsync on, so a crash test loses only
 * what PostgreSQL itself would lose.
 */

/** How `pg_ctl stop` ends the server: `fast` rolls back sessions and checkpoints; `immediate` is a crash. */
export type StopMode = "fast" | "immediate";

/** A test's own PostgreSQL cluster. */
export interface PostgresCluster {
  readonly port: number;
  /** A connection string for `database` on this cluster (user postgres, trust). */
  url(database?: string): string;
  /** Starts the server and waits until it accepts connections. */
  start(): Promise<void>;
  stop(mode: StopMode): Promise<void>;
  /** `pg_ctl restart -m mode`: down and up again, waiting until it accepts connections. */
  restart(mode: StopMode): Promise<void>;
  /** SIGSTOP to the postmaster and every process it forked: the server holds every connection and answers nothing. */
  freeze(): void;
  /** SIGCONT to every frozen process, the postmaster last. */
  thaw(): void;
  /** Whether a new connection gets an answer to a query now (within `timeoutMs`). */
  accepts(timeoutMs?: number): Promise<boolean>;
  /** What the server wrote to its log, for a failing test's message. */
  log(): string;
  /** Stops the server at once and removes its files; safe to call twice. */
  destroy(): void;
}

/** The binaries of the newest PostgreSQL installed, or a clear failure naming what is missing. */
function binaries(): { initdb: string; pgCtl: string } {
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(path.join(root, v, "bin", "pg_ctl")) && existsSync(path.join(root, v, "bin", "initdb")))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) {
    throw new Error(
      `no PostgreSQL server binaries under ${root}/*/bin (initdb, pg_ctl): the outage tests start a cluster of their own; ` +
        "install the Debian postgresql package (bash .ci/prepare does)",
    );
  }
  const bin = path.join(root, versions[0]!, "bin");
  return { initdb: path.join(bin, "initdb"), pgCtl: path.join(bin, "pg_ctl") };
}

/** Runs a PostgreSQL binary as the postgres OS user, as the server requires. */
function asPostgres(file: string, args: string[], timeoutMs = 120_000): Promise<{ stdout: string; stderr: string }> {
  return run("runuser", ["-u", "postgres", "--", file, ...args], { timeout: timeoutMs });
}

/** Processes whose parent is `pid`, read from /proc. */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      // The command name may hold spaces and parentheses: the fields after its closing one are fixed.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === pid) children.push(Number(entry));
    } catch {
      // The process ended while being read.
    }
  }
  return children;
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Already gone.
  }
}

/**
 * Creates a cluster in a temporary directory and starts it. The directory and the server go when
 * `destroy` is called, and in any case when the test process exits.
 */
export async function startPostgresCluster(): Promise<PostgresCluster> {
  const { initdb, pgCtl } = binaries();
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), "pg-cluster-"));
  const dataDir = path.join(dir, "data");
  const logFile = path.join(dir, "server.log");
  const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
  chownSync(dir, uid, gid);
  let destroyed = false;
  let frozen: number[] = [];

  const postmasterPid = (): number | undefined => {
    try {
      return Number(readFileSync(path.join(dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
    } catch {
      return undefined;
    }
  };
  const destroy = (): void => {
    if (destroyed) return;
    destroyed = true;
    for (const pid of frozen) signal(pid, "SIGCONT");
    const pid = postmasterPid();
    if (pid !== undefined) {
      for (const child of childrenOf(pid)) signal(child, "SIGKILL");
      signal(pid, "SIGKILL");
    }
    rmSync(dir, { recursive: true, force: true });
  };
  process.once("exit", destroy);

  try {
    await asPostgres(initdb, ["-D", dataDir, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-sync"]);
    writeFileSync(
      path.join(dataDir, "postgresql.auto.conf"),
      [
        `port = ${port}`,
        "listen_addresses = '127.0.0.1'",
        `unix_socket_directories = '${dir}'`,
        "fsync = on",
        "synchronous_commit = on",
        "max_connections = 100",
        "shared_buffers = '32MB'",
        "",
      ].join("\n"),
    );
    chownSync(path.join(dataDir, "postgresql.auto.conf"), uid, gid);
  } catch (error) {
    destroy();
    throw error;
  }

  const ctl = async (args: string[]): Promise<void> => {
    await asPostgres(pgCtl, ["-D", dataDir, "-l", logFile, "-w", "-t", "60", ...args]);
  };
  const cluster: PostgresCluster = {
    port,
    url: (database = "postgres") => `postgres://postgres@127.0.0.1:${port}/${database}`,
    start: () => ctl(["start"]),
    stop: (mode) => ctl(["stop", "-m", mode]),
    restart: (mode) => ctl(["restart", "-m", mode]),
    freeze() {
      const pid = postmasterPid();
      if (pid === undefined) throw new Error("the cluster is not running");
      // The postmaster first, so it forks nothing more while its children are stopped.
      signal(pid, "SIGSTOP");
      frozen = [pid, ...childrenOf(pid)];
      for (const child of frozen.slice(1)) signal(child, "SIGSTOP");
    },
    thaw() {
      for (const pid of frozen.slice(1)) signal(pid, "SIGCONT");
      if (frozen[0] !== undefined) signal(frozen[0], "SIGCONT");
      frozen = [];
    },
    async accepts(timeoutMs = 1000) {
      const client = new pg.Client({ connectionString: cluster.url(), connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
      client.on("error", () => undefined);
      try {
        await client.connect();
        await client.query("SELECT 1");
        return true;
      } catch {
        return false;
      } finally {
        void client.end().catch(() => undefined);
      }
    },
    log: () => (existsSync(logFile) ? readFileSync(logFile, "utf8") : ""),
    destroy,
  };
  try {
    await cluster.start();
  } catch (error) {
    const log = cluster.log();
    destroy();
    throw new Error(`the test's PostgreSQL cluster did not start: ${String(error)}\n${log}`);
  }
  return cluster;
}
