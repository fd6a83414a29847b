import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DataDirInUseError, lockDataDir, lockFileName } from "./data-dir-lock.js";

/*
 * DATA_DIR's owner lock: one holder at a time, named when another is refused; a lock whose holder
 * is gone (exited, or its pid reused by another process) is taken over.
 */

let dir: string;
let lockFile: string;
beforeEach(() => {
  dir = realpathSync(mkdtempSync(path.join(tmpdir(), "data-dir-lock-")));
  lockFile = path.join(dir, lockFileName);
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** A lock file as another process would have written it. */
function writeLock(holder: Record<string, unknown>): void {
  writeFileSync(lockFile, JSON.stringify({ command: "node src/server.ts", since: "2026-11-29T00:00:00.000Z", ...holder }));
}

describe("lockDataDir", () => {
  it("is held once: a second taking in the same process is refused until the first is released", async () => {
    const lock = await lockDataDir(dir);
    await expect(lockDataDir(dir)).rejects.toThrow(DataDirInUseError);
    await lock.release();
    expect(readdirSync(dir)).toEqual([]);
    await (await lockDataDir(dir)).release();
  });

  it("gives one of many processes taking it at once the lock, and names that one to the others", async () => {
    const takers = Array.from({ length: 8 }, () =>
      spawn(
        process.execPath,
        [
          "--import",
          "tsx",
          "-e",
          `import("./src/db/data-dir-lock.ts").then((m) => m.lockDataDir(${JSON.stringify(dir)})).then(() => { console.log("held"); setTimeout(() => {}, 3000); }, (e) => { console.log(e.message); process.exit(1); })`,
        ],
        {
          cwd: path.resolve(import.meta.dirname, "../.."),
        },
      ),
    );
    const outcomes = await Promise.all(
      takers.map(
        (child) =>
          new Promise<string>((resolve) => {
            let out = "";
            child.stdout.on("data", (chunk: Buffer) => {
              out += chunk;
              if (out.includes("\n")) resolve(out.trim());
            });
            child.once("exit", () => resolve(out.trim()));
          }),
      ),
    );
    for (const child of takers) child.kill();
    expect(outcomes.filter((outcome) => outcome === "held")).toHaveLength(1);
    const holder = takers[outcomes.indexOf("held")]!.pid;
    expect(outcomes.filter((outcome) => outcome !== "held")).toEqual(Array(7).fill(expect.stringContaining(`in use by process ${holder}`)));
  }, 60_000);

  it("refuses a directory a live process holds, naming the directory, the process and its command", async () => {
    writeLock({ pid: process.ppid, startTicks: null });
    await expect(lockDataDir(dir)).rejects.toThrow(
      `DATA_DIR ${dir} is in use by process ${process.ppid} (node src/server.ts, since 2026-11-29T00:00:00.000Z): the embedded database has one owner`,
    );
    expect(JSON.parse(readFileSync(lockFile, "utf8")).pid).toBe(process.ppid);
  });

  it("takes over the lock of a process that has exited", async () => {
    const exited = spawnSync(process.execPath, ["-e", ""]).pid;
    writeLock({ pid: exited, startTicks: null });
    const lock = await lockDataDir(dir);
    expect(JSON.parse(readFileSync(lockFile, "utf8")).pid).toBe(process.pid);
    await lock.release();
  });

  it.runIf(existsSync("/proc/self/stat"))(
    "takes over a lock whose pid now belongs to another process (a different start time)",
    async () => {
      writeLock({ pid: process.ppid, startTicks: 1 });
      await (await lockDataDir(dir)).release();
    },
  );

  it("takes over a lock file that names no holder", async () => {
    writeFileSync(lockFile, '{"pid":');
    await (await lockDataDir(dir)).release();
  });

  it("leaves a lock it no longer holds alone on release", async () => {
    const lock = await lockDataDir(dir);
    writeLock({ pid: process.ppid, startTicks: null });
    await lock.release();
    expect(JSON.parse(readFileSync(lockFile, "utf8")).pid).toBe(process.ppid);
  });
});
