/*
 * The service as another commit built it, started beside this checkout's so that `npm run bench` can
 * send the same requests to both, interleaved round by round (BENCH_BASELINE=<commit>): on a shared
 * machine that drifts ±20 % from one minute to the next, only an interleaved run says what a change
 * cost (issue 42: create with confirm with the ledger against the commit before it).
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ChildProcess } from "node:child_process";
import { prepareDatabase, startServer } from "./service.js";

const repositoryRoot = fileURLToPath(new URL("../", import.meta.url));

/** The baseline's service, and the commit it is. */
export interface Baseline {
  /** The commit's short hash, as the report names it. */
  readonly commit: string;
  readonly url: string;
  readonly adminKey: string;
  readonly child: ChildProcess;
}

/**
 * A worktree of `ref` under the system's temporary directory (made once, reused by later runs),
 * sharing this checkout's node_modules when both lock the same packages and installing its own
 * otherwise.
 */
function worktreeOf(ref: string): { commit: string; dir: string } {
  const git = (...args: string[]) => execFileSync("git", args, { cwd: repositoryRoot, encoding: "utf8" }).trim();
  const commit = git("rev-parse", "--short", `${ref}^{commit}`);
  const dir = join(tmpdir(), `payments-bench-baseline-${commit}`);
  if (!existsSync(dir)) git("worktree", "add", "--detach", dir, commit);
  if (!existsSync(join(dir, "node_modules"))) {
    const lock = (root: string) => readFileSync(join(root, "package-lock.json"), "utf8");
    if (lock(dir) === lock(repositoryRoot)) symlinkSync(join(repositoryRoot, "node_modules"), join(dir, "node_modules"), "dir");
    else execFileSync("npm", ["ci", "--no-audit", "--no-fund"], { cwd: dir, stdio: "inherit" });
  }
  return { commit, dir };
}

/**
 * Starts `ref`'s service (its production build, as `npm start` runs it) with `workers` workers on a
 * database of its own, `databaseUrl`'s server with the database's name suffixed `_baseline`, created
 * afresh: the commit's migrations are not this checkout's.
 */
export async function startBaseline(ref: string, databaseUrl: string, workers: string): Promise<Baseline> {
  const { commit, dir } = worktreeOf(ref);
  const url = new URL(databaseUrl);
  url.pathname = `${url.pathname}_baseline`;
  await prepareDatabase(url.toString(), true);
  const server = await startServer(url.toString(), workers, {}, dir);
  return { commit, ...server };
}
