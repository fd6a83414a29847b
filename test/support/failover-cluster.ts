import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import {
  appendFileSync,
  chownSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { freePort } from "./ports.js";

const run = promisify(execFile);

/*
 * A PostgreSQL 15 primary and synchronous standby managed by pg_auto_failover, for the fault tests
 * in which the primary's machine dies: a monitor and two data nodes ("a" and "b") of a test's own on
 * free loopback ports, each node's keeper (`pg_autoctl run`) a child process of the test. A node's
 * "machine" is its keeper and every postgres process of its data directory; killing or freezing it
 * signals all of them, since each postgres child sits in a session of its own and no single process
 * group holds the node. Everything runs as the `postgres` OS user (initdb and postgres refuse root),
 * with the monitor tuned to promote within seconds rather than the half minute its defaults take.
 */

const pgAutoctl = "/usr/bin/pg_autoctl";
const pgBin = "/usr/lib/postgresql/15/bin";
const extension = "/usr/share/postgresql/15/extension/pgautofailover.control";

/**
 * The monitor's failure detection, shortened for tests (defaults in parentheses); all are reloadable
 * and read from postgresql.auto.conf at the monitor's start. A node is failed over once the health
 * check has failed (every try) and its keeper has been silent for the unhealthy timeout: a killed
 * node refuses connections at once, a frozen one is seen only through the connect timeout.
 */
const monitorSettings = {
  // (5 s) The health check worker probes every node each second.
  "pgautofailover.health_check_period": "1000",
  // (5 s) A frozen machine's kernel still accepts the TCP connection, so only this ends the probe.
  "pgautofailover.health_check_timeout": "1000",
  // (2, 2 s) Two more tries half a second apart: a loaded CI machine missing one probe fails nothing over.
  "pgautofailover.health_check_max_retries": "2",
  "pgautofailover.health_check_retry_delay": "500",
  // (20 s) Keepers report every second, so three silent seconds and a failed health check mean a dead machine.
  "pgautofailover.node_considered_unhealthy_timeout": "3000",
  // (30 s) How long an unreachable old primary is given to demote itself before the standby takes writes;
  // the tests' old primary is dead or frozen, and its writes wait on the synchronous standby anyway.
  "pgautofailover.primary_demote_timeout": "3000",
};

/**
 * Every server's, in postgresql.auto.conf, which is read after pg_auto_failover's include; the
 * standby copies its primary's with pg_basebackup.
 */
const serverSettings = {
  // pg_auto_failover sizes memory to the machine (shared_buffers a quarter of it) for each of the three servers.
  shared_buffers: "'32MB'",
  work_mem: "'4MB'",
  maintenance_work_mem: "'64MB'",
  effective_cache_size: "'1GB'",
  // pg_basebackup (a standby's creation, a rejoin pg_rewind cannot do) waits for a spread checkpoint, paced
  // at 100 ms a dirty buffer: 96 s after CREATE DATABASE on a CI machine. Written at once, it takes a second.
  checkpoint_completion_target: "0",
};

/** The monitor's states in which a node takes writes (pg_auto_failover's CanTakeWritesInState). */
const writableStates = new Set(["single", "wait_primary", "primary", "join_primary", "apply_settings"]);

/** One data node of the cluster: a PostgreSQL server and its keeper, on a "machine" of its own. */
export interface FailoverNode {
  /** pg_auto_failover's node name, "a" (the first primary) or "b". */
  readonly name: string;
  readonly port: number;
  /** A connection string for `database` on this node alone (user postgres, trust). */
  url(database?: string): string;
}

/** When and where a primary was found writable, for measuring a failover against the fault's time. */
export interface PrimaryFound {
  readonly node: FailoverNode;
  /** Date.now() when a write on it first committed. */
  readonly at: number;
}

/** A test's own pg_auto_failover cluster: a monitor, a primary and a synchronous standby. */
export interface FailoverCluster {
  readonly nodes: readonly [FailoverNode, FailoverNode];
  /** The monitor's database, for asserting on pg_auto_failover's own view (pgautofailover.node, .event). */
  readonly monitorUrl: string;
  /** Both nodes in one URL with target_session_attrs=read-write, the way the service is deployed against an HA pair. */
  multiHostUrl(database?: string): string;
  /** The node the monitor has as a writable primary now (both its reported and goal state), if any: none while a failover runs. */
  primary(): Promise<FailoverNode | undefined>;
  /**
   * Resolves when a node other than `except` is primary for the monitor and a write on it commits,
   * with the time that first happened: the end of a failover as a client sees it.
   */
  waitForPrimary(except?: FailoverNode, timeoutMs?: number): Promise<PrimaryFound>;
  /** SIGKILL to the node's keeper and every postgres process of its data directory: the machine lost. */
  killMachine(node: FailoverNode): void;
  /** SIGSTOP to all of them, keeper first: the machine hangs with its connections open. */
  freezeMachine(node: FailoverNode): void;
  /** SIGCONT to every process `freezeMachine` stopped, in the reverse order. */
  thawMachine(node: FailoverNode): void;
  /**
   * Starts a killed node's keeper again, which rejoins as the standby (pg_rewind, else a new base
   * backup); resolves once it replicates synchronously again, so one cluster can serve several faults.
   */
  restartMachine(node: FailoverNode, timeoutMs?: number): Promise<void>;
  /**
   * Resolves once one node is primary and the other streams as its synchronous standby (the monitor
   * has them primary and secondary, the primary's pg_stat_replication says sync or quorum): after
   * `thawMachine`, before a next fault.
   */
  waitForStandby(timeoutMs?: number): Promise<void>;
  /** A planned switchover through the monitor; resolves when the other node is primary and writable. */
  switchover(timeoutMs?: number): Promise<PrimaryFound>;
  /** The monitor's view of the nodes, e.g. "a: primary/primary, b: secondary/secondary" (reported/goal). */
  states(): Promise<string>;
  /** The keepers' output and the servers' logs (their ends), for a failing test's message. */
  log(): string;
  /** Kills everything at once and removes the files; safe to call twice. */
  destroy(): void;
}

/** Options of {@link startFailoverCluster}. */
export interface FailoverClusterOptions {
  /** The database pg_auto_failover creates on the primary (and so on the standby) for the test; "payments" by default. */
  database?: string;
  /** How long creating the cluster and reaching synchronous replication may take; 120 s by default, as CI machines are slow. */
  timeoutMs?: number;
}

/** A process as /proc shows it. */
interface Proc {
  readonly pid: number;
  readonly ppid: number;
  readonly argv: string[];
}

/** Every live process (zombies left out: they are dead, only not yet reaped). */
function processes(): Proc[] {
  const all: Proc[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      // The command name may hold spaces and parentheses: the fields after its closing one are fixed.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (state === "Z" || state === "X") continue;
      const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
      all.push({ pid: Number(entry), ppid: Number(ppid), argv });
    } catch {
      // The process ended while being read.
    }
  }
  return all;
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Already gone.
  }
}

/** The binaries, or a clear failure naming the packages that hold them. */
function checkInstalled(): void {
  const missing = [pgAutoctl, path.join(pgBin, "pg_ctl"), extension].filter((file) => !existsSync(file));
  if (missing.length > 0) {
    throw new Error(
      `missing ${missing.join(", ")}: the failover tests run a pg_auto_failover cluster of their own; ` +
        "install the Debian packages postgresql-15, pg-auto-failover-cli and postgresql-15-auto-failover (bash .ci/prepare does)",
    );
  }
}

/**
 * Creates a monitor and two data nodes in a temporary directory, starts their keepers and resolves
 * once "a" is primary with "b" its synchronous standby. The directory and every process go when
 * `destroy` is called, and in any case when the test process exits.
 */
export async function startFailoverCluster(options: FailoverClusterOptions = {}): Promise<FailoverCluster> {
  checkInstalled();
  const database = options.database ?? "payments";
  const timeoutMs = options.timeoutMs ?? 120_000;
  const started = Date.now();
  const [monitorPort, portA, portB] = [await freePort(), await freePort(), await freePort()];
  if (new Set([monitorPort, portA, portB]).size < 3) throw new Error("freePort gave the same port twice; try again");
  const dir = mkdtempSync(path.join(tmpdir(), "pg-failover-"));
  const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
  chownSync(dir, uid, gid);
  const dataDir = (name: string): string => path.join(dir, name);
  const keeperLog = (name: string): string => path.join(dir, `${name}.keeper.log`);
  const monitorUri = `postgres://autoctl_node@127.0.0.1:${monitorPort}/pg_auto_failover?sslmode=disable`;
  const monitorUrl = `postgres://postgres@127.0.0.1:${monitorPort}/pg_auto_failover`;
  /*
   * A clean environment: a test's PG* variables must not steer pg_autoctl, and its configuration,
   * state and pid files (kept under HOME's XDG directories by default, or /tmp) stay in the
   * temporary directory. PGHOST and PG_REGRESS_SOCK_DIR put the servers' sockets there too, where
   * pg_autoctl then looks for them; C.UTF-8 gives UTF8 databases like the shared server's.
   */
  mkdirSync(path.join(dir, "run"), { mode: 0o700 });
  chownSync(path.join(dir, "run"), uid, gid);
  const env = {
    PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin",
    HOME: dir,
    LANG: "C.UTF-8",
    LC_ALL: "C.UTF-8",
    XDG_CONFIG_HOME: path.join(dir, "config"),
    XDG_DATA_HOME: path.join(dir, "state"),
    XDG_RUNTIME_DIR: path.join(dir, "run"),
    PG_REGRESS_SOCK_DIR: dir,
    PGHOST: dir,
  };
  /** Runs a binary as the postgres OS user, as the server requires. */
  const asPostgres = (file: string, args: string[], timeout = 120_000): Promise<{ stdout: string; stderr: string }> =>
    run("runuser", ["-u", "postgres", "--", file, ...args], { env, cwd: dir, timeout });

  const keepers = new Map<string, ChildProcess>();
  const frozen = new Map<string, number[]>();
  const monitor = new pg.Pool({ connectionString: monitorUrl, max: 2, connectionTimeoutMillis: 5000, allowExitOnIdle: true });
  monitor.on("error", () => undefined);
  let destroyed = false;

  /**
   * The node's machine: its keeper's process tree (from the pg_autoctl the test started), and anything
   * else naming its data directory on its command line (a postmaster whose keeper died, pg_rewind,
   * pg_ctl) with its descendants; parents before children, so that a parent is stopped before it can
   * react to a child stopping. Never postmaster.pid: a stale one may name a pid reused since.
   */
  const machine = (name: string): number[] => {
    const all = processes();
    const data = dataDir(name);
    const roots = new Set<number>();
    const keeper = keepers.get(name);
    if (keeper?.pid !== undefined && keeper.exitCode === null && keeper.signalCode === null) roots.add(keeper.pid);
    for (const proc of all) if (proc.argv.includes(data)) roots.add(proc.pid);
    const children = new Map<number, number[]>();
    for (const proc of all) children.set(proc.ppid, [...(children.get(proc.ppid) ?? []), proc.pid]);
    const live = new Set(all.map((proc) => proc.pid));
    const parent = new Map(all.map((proc) => [proc.pid, proc.ppid]));
    const order: number[] = [];
    const seen = new Set<number>();
    // Breadth first from the roots that have no root above them, so every parent comes before its children.
    const inTree = (pid: number): boolean => {
      for (let up = parent.get(pid); up !== undefined && up > 1; up = parent.get(up)) if (roots.has(up)) return true;
      return false;
    };
    const queue = [...roots].filter((pid) => live.has(pid) && !inTree(pid));
    while (queue.length > 0) {
      const pid = queue.shift()!;
      if (seen.has(pid)) continue;
      seen.add(pid);
      order.push(pid);
      queue.push(...(children.get(pid) ?? []));
    }
    return order;
  };

  /** Stops every process of the node, and again any it forked meanwhile, until none is left running. */
  const stopAll = (name: string): number[] => {
    const stopped: number[] = [];
    for (let round = 0; round < 5; round++) {
      const fresh = machine(name).filter((pid) => !stopped.includes(pid));
      if (fresh.length === 0) break;
      for (const pid of fresh) signal(pid, "SIGSTOP");
      stopped.push(...fresh);
    }
    return stopped;
  };

  /**
   * The System V semaphore pg_autoctl serialises its log lines with, one a keeper, which outlives a
   * SIGKILL (machine-wide, like a leaked file): its pid files, under XDG_RUNTIME_DIR, name it after
   * the pid, the data directory and the version strings.
   */
  const semaphores = (name: string): string[] => {
    const pidFiles = path.join(env.XDG_RUNTIME_DIR, "pg_autoctl", dataDir(name));
    const ids = new Set<string>();
    for (const file of existsSync(pidFiles) ? readdirSync(pidFiles).filter((f) => f.endsWith(".pid")) : []) {
      try {
        const id = readFileSync(path.join(pidFiles, file), "utf8")
          .split("\n")
          .slice(1)
          .find((line) => /^[0-9]+$/.test(line));
        if (id !== undefined) ids.add(id);
      } catch {
        // Removed by its keeper meanwhile.
      }
    }
    return [...ids];
  };

  const kill = (name: string): void => {
    const ids = semaphores(name);
    const stopped = stopAll(name);
    // All are stopped first, so none sees another die: no keeper restarting its postgres, no postmaster reacting to a child.
    for (const pid of stopped) signal(pid, "SIGKILL");
    frozen.delete(name);
    for (const id of stopped.length > 0 ? ids : []) {
      try {
        execFileSync("ipcrm", ["-s", id], { stdio: "ignore" });
      } catch {
        // Gone already.
      }
    }
  };

  const destroy = (): void => {
    if (destroyed) return;
    destroyed = true;
    process.off("exit", destroy);
    for (const name of ["a", "b", "monitor"]) kill(name);
    void monitor.end().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  process.once("exit", destroy);

  const tail = (file: string, chars = 20_000): string => {
    try {
      const text = readFileSync(file, "utf8");
      return text.length > chars ? `…${text.slice(-chars)}` : text;
    } catch {
      return "";
    }
  };
  const log = (): string => {
    const parts: string[] = [];
    for (const name of ["monitor", "a", "b"]) {
      parts.push(`--- ${name}: pg_autoctl\n${tail(keeperLog(name))}`);
      const serverLogs = path.join(dataDir(name), "log");
      for (const file of existsSync(serverLogs) ? readdirSync(serverLogs).sort() : []) {
        parts.push(`--- ${name}: ${file}\n${tail(path.join(serverLogs, file))}`);
      }
    }
    return parts.join("\n");
  };

  /**
   * Starts a keeper as a child process of the test, its output appended to a file so that nothing
   * blocks on an unread pipe. Not through runuser: like su, it stops itself when its child is
   * stopped, and a freeze's thaw could leave it so; Node sets the postgres uid and gid itself.
   */
  const startKeeper = (name: string, args: string[]): void => {
    const out = openSync(keeperLog(name), "a");
    try {
      const child = spawn(pgAutoctl, args, { env, cwd: dir, uid, gid, stdio: ["ignore", out, out] });
      child.on("error", (error) => appendFileSync(keeperLog(name), `\n(the test could not start pg_autoctl: ${error.message})\n`));
      keepers.set(name, child);
    } finally {
      closeSync(out);
    }
  };
  const keeperExited = (name: string): boolean => {
    const keeper = keepers.get(name);
    return keeper !== undefined && (keeper.exitCode !== null || keeper.signalCode !== null);
  };

  const query = async <T extends pg.QueryResultRow>(url: string, sql: string, timeout = 2000): Promise<T[]> => {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeout, query_timeout: timeout });
    client.on("error", () => undefined);
    try {
      await client.connect();
      return (await client.query<T>(sql)).rows;
    } finally {
      void client.end().catch(() => undefined);
    }
  };
  const monitorNodes = async (): Promise<{ name: string; reported: string; goal: string }[]> =>
    (
      await monitor.query<{ name: string; reported: string; goal: string }>(
        "SELECT nodename AS name, reportedstate::text AS reported, goalstate::text AS goal FROM pgautofailover.node ORDER BY nodeid",
      )
    ).rows;
  const states = async (): Promise<string> => {
    try {
      return (await monitorNodes()).map((n) => `${n.name}: ${n.reported}/${n.goal}`).join(", ");
    } catch (error) {
      return `(the monitor did not answer: ${(error as Error).message})`;
    }
  };

  const node = (name: string, port: number): FailoverNode => ({
    name,
    port,
    url: (db = database) => `postgres://postgres@127.0.0.1:${port}/${db}`,
  });
  const nodes = [node("a", portA), node("b", portB)] as const;
  const byName = (name: string): FailoverNode | undefined => nodes.find((n) => n.name === name);

  const primary = async (): Promise<FailoverNode | undefined> => {
    const rows = await monitorNodes();
    const writable = rows.filter((row) => writableStates.has(row.reported) && writableStates.has(row.goal));
    return writable.length === 1 ? byName(writable[0]!.name) : undefined;
  };

  /**
   * Whether a write commits on `target` now. A commit waits for the synchronous standby, so a
   * promoted node whose standby setting still names the dead one is not yet writable; the wait is
   * cut on the client's side (a server-side cancel would let the commit through with a warning).
   */
  const commits = async (target: FailoverNode): Promise<boolean> => {
    const client = new pg.Client({ connectionString: target.url(), connectionTimeoutMillis: 1000, query_timeout: 1000 });
    client.on("error", () => undefined);
    try {
      await client.connect();
      const { rows } = await client.query<{ recovery: boolean }>("SELECT pg_is_in_recovery() AS recovery");
      if (rows[0]?.recovery !== false) return false;
      await client.query("CREATE TEMP TABLE failover_probe (id int)");
      return true;
    } catch {
      return false;
    } finally {
      void client.end().catch(() => undefined);
    }
  };

  const waitForPrimary = async (except?: FailoverNode, waitMs = 60_000): Promise<PrimaryFound> => {
    const deadline = Date.now() + waitMs;
    for (;;) {
      const found = await primary().catch(() => undefined);
      if (found !== undefined && found !== except && (await commits(found))) return { node: found, at: Date.now() };
      if (Date.now() > deadline) {
        throw new Error(
          `no node${except === undefined ? "" : ` other than ${except.name}`} was a writable primary within ${waitMs} ms; ` +
            `the monitor has ${await states()}\n${log()}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };

  /** Waits until `check` holds, failing with the monitor's view and the logs if a watched keeper exits or time runs out. */
  const until = async (what: string, check: () => Promise<boolean>, waitMs: number, watch: string[], everyMs = 100): Promise<void> => {
    const deadline = Date.now() + waitMs;
    while (!(await check().catch(() => false))) {
      const exited = watch.find(keeperExited);
      if (exited !== undefined) throw new Error(`${what}: the keeper of ${exited} exited\n${log()}`);
      if (Date.now() > deadline) throw new Error(`${what}: not within ${waitMs} ms; the monitor has ${await states()}\n${log()}`);
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  };

  /** Whether one node is primary and the other its streaming synchronous standby, for the monitor and on the primary itself. */
  const paired = async (): Promise<boolean> => {
    const rows = await monitorNodes();
    const main = rows.find((row) => row.reported === "primary" && row.goal === "primary");
    const standby = rows.find((row) => row.reported === "secondary" && row.goal === "secondary");
    if (main === undefined || standby === undefined) return false;
    const [sync] = await query<{ names: string; standbys: number }>(
      byName(main.name)!.url(),
      "SELECT current_setting('synchronous_standby_names') AS names, " +
        "(SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state IN ('sync', 'quorum'))::int AS standbys",
    );
    if (sync === undefined || sync.names === "" || sync.standbys === 0) return false;
    const [recovery] = await query<{ recovery: boolean }>(byName(standby.name)!.url(), "SELECT pg_is_in_recovery() AS recovery");
    return recovery?.recovery === true;
  };
  const waitForStandby = (waitMs = 60_000, watch = ["monitor"]): Promise<void> =>
    until("a primary with its synchronous standby", paired, waitMs, watch, 250);

  const common = ["--pgctl", path.join(pgBin, "pg_ctl"), "--hostname", "127.0.0.1", "--auth", "trust", "--ssl-mode", "disable", "--no-ssl"];
  const dataNode = (name: string, port: number): string[] => [
    ...["create", "postgres", "--pgdata", dataDir(name), "--pgport", String(port), "--name", name],
    ...["--listen", "127.0.0.1", "--dbname", database, "--monitor", monitorUri, ...common],
  ];
  /** Settings pg_autoctl leaves alone, in postgresql.auto.conf, which PostgreSQL reads last. */
  const configure = (name: string, settings: Record<string, string>): void => {
    const file = path.join(dataDir(name), "postgresql.auto.conf");
    appendFileSync(
      file,
      `${Object.entries(settings)
        .map(([key, value]) => `${key} = ${value}`)
        .join("\n")}\n`,
    );
    chownSync(file, uid, gid);
  };

  const cluster: FailoverCluster = {
    nodes,
    monitorUrl,
    multiHostUrl: (db = database) => `postgres://postgres@127.0.0.1:${portA},127.0.0.1:${portB}/${db}?target_session_attrs=read-write`,
    primary,
    waitForPrimary,
    killMachine: (target) => kill(target.name),
    freezeMachine(target) {
      if (frozen.has(target.name)) throw new Error(`the machine of ${target.name} is frozen already`);
      // The keeper before its postgres: a running keeper would report the frozen server to the monitor, which no dead machine does.
      frozen.set(target.name, stopAll(target.name));
    },
    thawMachine(target) {
      // Children before parents: the server is up again before its keeper looks at it.
      for (const pid of [...(frozen.get(target.name) ?? [])].reverse()) signal(pid, "SIGCONT");
      frozen.delete(target.name);
    },
    async restartMachine(target, waitMs = 60_000) {
      if (machine(target.name).length > 0) throw new Error(`the machine of ${target.name} still runs: kill it first (or thaw it)`);
      startKeeper(target.name, ["run", "--pgdata", dataDir(target.name)]);
      await waitForStandby(waitMs, ["monitor", target.name]);
    },
    waitForStandby: (waitMs) => waitForStandby(waitMs),
    async switchover(waitMs = 60_000) {
      // A planned switchover needs a standby in sync to hand over to; after a fault it may still be catching up.
      await waitForStandby(waitMs);
      const before = await primary();
      if (before === undefined) throw new Error(`no primary to switch over from; the monitor has ${await states()}`);
      // What `pg_autoctl perform switchover` calls, without its process or its wait on the monitor's notifications.
      await monitor.query("SELECT pgautofailover.perform_failover('default', 0)");
      return waitForPrimary(before, waitMs);
    },
    states,
    log,
    destroy,
  };

  try {
    // initdb of our own, without the fsync of every file pg_autoctl's would do (seconds on a busy CI disk); what
    // the tests kill is processes, never the kernel's page cache. pg_autoctl takes over an existing data directory.
    await Promise.all(
      ["monitor", "a"].map((name) =>
        asPostgres(path.join(pgBin, "initdb"), ["-D", dataDir(name), "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-sync"]),
      ),
    );
    configure("monitor", { ...serverSettings, ...monitorSettings });
    configure("a", serverSettings);
    const deadline = started + timeoutMs;
    const monitorArgs = ["create", "monitor", "--pgdata", dataDir("monitor"), "--pgport", String(monitorPort), "--listen", "127.0.0.1"];
    startKeeper("monitor", [...monitorArgs, ...common, "--run"]);
    const monitorReady = (): Promise<boolean> => monitor.query("SELECT 1 FROM pgautofailover.formation").then(() => true);
    await until("the monitor", monitorReady, deadline - Date.now(), ["monitor"]);
    startKeeper("a", [...dataNode("a", portA), "--run"]);
    // b only once a has registered, so that a is the one to become primary.
    const single = async (): Promise<boolean> => (await monitorNodes()).some((n) => n.name === "a" && n.reported === "single");
    await until("a registered as a single node", single, deadline - Date.now(), ["monitor", "a"]);
    // b registers, waits for a to take a standby, copies it with pg_basebackup and goes on as its keeper.
    startKeeper("b", [...dataNode("b", portB), "--run"]);
    await waitForStandby(deadline - Date.now(), ["monitor", "a", "b"]);
  } catch (error) {
    // A failed initdb says why on its stderr; the other failures carry the logs already.
    const stderr = (error as { stderr?: string }).stderr;
    destroy();
    throw new Error(`the test's pg_auto_failover cluster did not start: ${String(error)}${stderr === undefined ? "" : `\n${stderr}`}`);
  }
  return cluster;
}
