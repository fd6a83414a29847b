import { readFileSync, unlinkSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { link, readFile, unlink, writeFile } from "node:fs/promises";
import path from "node:path";

/**
 * The embedded database is one PGlite in one process: a second process opening the same files
 * keeps its own copy in memory, and whichever writes last wins, losing the other's data. So a
 * process takes DATA_DIR's owner lock before it opens the files, as PostgreSQL's postmaster.pid
 * does: a file created only if absent, naming its holder, and taken over when that holder is gone.
 */

/** The lock file, beside the database's files. */
export const lockFileName = "owner.lock";

/** What the lock file records of its holder. */
interface Holder {
  readonly pid: number;
  /** The process's start time in clock ticks since boot (Linux), so a reused pid is not taken for the holder. */
  readonly startTicks: number | null;
  readonly command: string;
  readonly since: string;
}

/** A DATA_DIR another live process holds: the message names the directory and that process. */
export class DataDirInUseError extends Error {
  constructor(dir: string, holder: Holder) {
    super(
      `DATA_DIR ${dir} is in use by process ${holder.pid} (${holder.command}, since ${holder.since}): ` +
        "the embedded database has one owner; stop that process first, or give this one another DATA_DIR",
    );
    this.name = "DataDirInUseError";
  }
}

/** A held lock; `release` gives it up (also done at the process's exit, should nobody call it). */
export interface DataDirLock {
  release(): Promise<void>;
}

/** Lock files this process holds, removed at exit should their release never run (process.exit). */
const held = new Map<string, string>();
let exitHookInstalled = false;

/**
 * Takes DATA_DIR's owner lock, or throws DataDirInUseError when a live process holds it. A lock
 * whose process is gone (killed, crashed) is taken over. Two processes taking over the same stale
 * lock at the same instant could both succeed, as with PostgreSQL's own lock file; a live holder
 * is never displaced.
 */
export async function lockDataDir(dataDir: string): Promise<DataDirLock> {
  const dir = path.resolve(dataDir);
  const file = path.join(dir, lockFileName);
  const self = describeSelf();
  const content = `${JSON.stringify(self)}\n`;
  // A stale lock is removed and creation tried again; the bound only stops a pathological loop.
  for (let attempt = 0; attempt < 10; attempt++) {
    // Written whole under another name, then linked into place (which fails if the name is taken):
    // no process ever reads a lock file that is still being written.
    const draft = `${file}.${process.pid}.${randomBytes(4).toString("hex")}`;
    await writeFile(draft, content, { mode: 0o600 });
    try {
      await link(draft, file);
      hold(file, content);
      return {
        async release() {
          if (held.get(file) !== content) return;
          held.delete(file);
          if ((await readFile(file, "utf8").catch(() => "")) === content) await unlink(file).catch(() => {});
        },
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    } finally {
      await unlink(draft).catch(() => {});
    }
    const found = await readFile(file, "utf8").catch(() => undefined);
    if (found === undefined) continue;
    const holder = parseHolder(found);
    if (holder !== undefined && (held.has(file) || isAlive(holder))) throw new DataDirInUseError(dir, holder);
    await unlink(file).catch(() => {});
  }
  throw new Error(`DATA_DIR ${dir}: could not take ${lockFileName} (it keeps changing)`);
}

function hold(file: string, content: string): void {
  held.set(file, content);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const [lockFile, lockContent] of held) {
      try {
        if (readFileSync(lockFile, "utf8") === lockContent) unlinkSync(lockFile);
      } catch {
        // Gone already: nothing to release.
      }
    }
  });
}

function describeSelf(): Holder {
  return {
    pid: process.pid,
    startTicks: startTicksOf(process.pid),
    command: [path.basename(process.argv0), ...process.argv.slice(1).map((arg) => path.relative(process.cwd(), arg) || arg)].join(" "),
    since: new Date().toISOString(),
  };
}

/** A lock file's holder; undefined for a file that names none (not one of ours), which counts as stale. */
function parseHolder(text: string): Holder | undefined {
  try {
    const parsed = JSON.parse(text) as Partial<Holder>;
    if (!Number.isSafeInteger(parsed.pid) || parsed.pid! <= 0) return undefined;
    return {
      pid: parsed.pid!,
      startTicks: typeof parsed.startTicks === "number" ? parsed.startTicks : null,
      command: typeof parsed.command === "string" ? parsed.command : "unknown command",
      since: typeof parsed.since === "string" ? parsed.since : "an unknown time",
    };
  } catch {
    return undefined;
  }
}

/**
 * Whether the holder still runs: its pid exists and, where Linux tells a process's start time, it is
 * the same process that wrote the lock. Our own pid holds nothing we do not know of: in a container
 * a restarted service often gets the pid its killed predecessor had.
 */
function isAlive(holder: Holder): boolean {
  if (holder.pid === process.pid) return false;
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    // EPERM: it exists, under another user.
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  const ticks = startTicksOf(holder.pid);
  return ticks === null || holder.startTicks === null || ticks === holder.startTicks;
}

/** Field 22 of /proc/<pid>/stat (start time since boot), or null where there is no /proc. */
function startTicksOf(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces and parentheses: count fields after its closing one.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(fields[19]);
    return Number.isSafeInteger(ticks) ? ticks : null;
  } catch {
    return null;
  }
}
