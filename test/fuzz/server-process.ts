import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { eachLine, listeningUrl } from "../support/server-log.js";
import { serverProgram } from "../support/server-process.js";

/** The repository root: the server runs from there as `npm start` would. */
const repositoryRoot = fileURLToPath(new URL("../../", import.meta.url));

/**
 * The server's V8 heap is capped far below what the machine would let it take: memory that grew
 * with the requests (a leak) would end the run in an out-of-memory crash, which the suite reports,
 * rather than pass unseen while V8 keeps growing its heap. A 100,000-request run on PostgreSQL
 * stays within 160 MiB of heap; the embedded database keeps its data outside the heap.
 */
const heapCapMiB = 256;

/** How a server process ended. */
export interface ProcessExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** Every line a server process wrote, kept across restarts for the card-number check of the log. */
export class ServerOutput {
  readonly stdout: string[] = [];
  readonly stderr: string[] = [];
}

/**
 * The service as a child process, as production runs it: a crash is seen as an exit rather than
 * taking the fuzzer down, and its resident memory is its own.
 */
export class ServerProcess {
  private exit: ProcessExit | undefined;

  private constructor(
    private readonly child: ChildProcess,
    /** Base URL of its port, from its "listening" log line. */
    readonly url: string,
  ) {
    child.once("exit", (code, signal) => {
      this.exit = { code, signal };
    });
  }

  /**
   * Starts the server (`serverProgram`, the production build) on an ephemeral port with rate limits
   * (per key; failed authentications and admin calls per address) no fuzz run reaches and the
   * sandbox test clock. DATABASE_URL is passed through (CI gives it a fresh PostgreSQL database);
   * without it the server runs the embedded database in memory.
   */
  static start(adminApiKey: string, output: ServerOutput): Promise<ServerProcess> {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PORT: "0",
      LOG_LEVEL: "info",
      // No load balancer is waiting to see it unready: it may stop at once.
      SHUTDOWN_DELAY_MS: "0",
      WORKERS: "1",
      ADMIN_API_KEY: adminApiKey,
      API_KEY_HASH_SECRET: "fuzz-api-key-hash-secret-32chars",
      DATA_ENCRYPTION_KEY: "7f".repeat(32),
      RATE_LIMIT_PER_MINUTE: "1000000000",
      AUTH_FAILURE_LIMIT_PER_MINUTE: "1000000000",
      ADMIN_RATE_LIMIT_PER_MINUTE: "1000000000",
      CARD_TESTING_LIMIT_PER_MINUTE: "1000000000",
      SANDBOX_TEST_CLOCK: "true",
    };
    if (env.DATABASE_URL === undefined || env.DATABASE_URL === "") {
      delete env.DATABASE_URL;
      env.DATA_DIR = ":memory:";
    }
    const child = spawn(process.execPath, [`--max-old-space-size=${heapCapMiB}`, serverProgram], {
      cwd: repositoryRoot,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error(`the server did not start within 120 s:\n${output.stderr.join("\n")}`));
      }, 120_000);
      const onExit = (code: number | null, signal: NodeJS.Signals | null): void => {
        clearTimeout(timer);
        reject(new Error(`the server exited while starting (code ${code}, signal ${signal}):\n${output.stderr.join("\n")}`));
      };
      child.once("exit", onExit);
      eachLine(child.stderr!, (line) => output.stderr.push(line));
      eachLine(child.stdout!, (line) => {
        output.stdout.push(line);
        const url = listeningUrl(line);
        if (url === undefined) return;
        clearTimeout(timer);
        child.off("exit", onExit);
        resolve(new ServerProcess(child, url));
      });
    });
  }

  /** Set once the process has ended. */
  get exited(): ProcessExit | undefined {
    return this.exit;
  }

  /**
   * Whether the process ends within `ms`. A connection refused or reset can reach the client
   * before the parent hears of its child's exit, so a failed request waits here to tell a crash
   * from a refusal.
   */
  async exitsWithin(ms: number): Promise<boolean> {
    if (this.exit !== undefined) return true;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.child.off("exit", onExit);
        resolve(false);
      }, ms);
      const onExit = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      this.child.once("exit", onExit);
    });
  }

  /** VmRSS from /proc, in bytes; undefined once the process is gone. */
  residentBytes(): number | undefined {
    try {
      const kilobytes = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${this.child.pid}/status`, "utf8"))?.[1];
      return kilobytes === undefined ? undefined : Number(kilobytes) * 1024;
    } catch {
      return undefined;
    }
  }

  /** Ends the process (SIGTERM, then SIGKILL after 5 s) and waits for it. */
  async stop(): Promise<void> {
    if (this.exit !== undefined) return;
    const exited = new Promise<void>((resolve) => this.child.once("exit", () => resolve()));
    this.child.kill("SIGTERM");
    const force = setTimeout(() => this.child.kill("SIGKILL"), 5_000);
    await exited;
    clearTimeout(force);
  }
}
