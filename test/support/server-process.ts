import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { eachLine, listeningUrl } from "./server-log.js";
import { adminApiKey, testDataEncryptionKey, testHashSecret, unreachedLimit } from "./service.js";

/** The repository root: the server runs from there as `npm start` would. */
const repositoryRoot = fileURLToPath(new URL("../../", import.meta.url));

/**
 * The server as `npm start` runs it in production: the build in dist/, built first when stale (the
 * tests' global setup builds it before any worker starts one, so two never build at once). It starts
 * in half the time of tsx compiling src/ at every start (1.8 s against 3.2 s on a busy 2-core host),
 * and the fault tests start dozens.
 */
export const serverProgram = "src/start.mjs";

/** A running server program (one process, so SIGKILL really kills the server) and everything it printed. */
export interface ServerProcess {
  readonly url: string;
  /** Its process id, to read its memory in /proc. */
  readonly pid: number;
  /** Everything it wrote on stdout and stderr so far. */
  output(): string;
  /** Whether it is still running: a fault test's first check is that nothing ended it. */
  running(): boolean;
  /** Ends it with SIGKILL, as a crash would, and waits for the exit. */
  kill(): Promise<void>;
  /** Stops it with SIGTERM and waits for the exit, so that every line it wrote has been read. */
  stop(): Promise<void>;
}

/**
 * The environment of a program of the service (the server, an operator's command) as the test
 * services configure it: the log on, their keys, and `env` on top. DATABASE_URL, DATA_DIR and
 * REDIS_URL are not inherited: `env` says where its data and counters live.
 */
export function programEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const inherited: NodeJS.ProcessEnv = { ...process.env };
  delete inherited.DATABASE_URL;
  delete inherited.DATA_DIR;
  delete inherited.REDIS_URL;
  return {
    ...inherited,
    LOG_LEVEL: "info",
    ADMIN_API_KEY: adminApiKey,
    API_KEY_HASH_SECRET: testHashSecret,
    DATA_ENCRYPTION_KEY: testDataEncryptionKey,
    AUTH_FAILURE_LIMIT_PER_MINUTE: unreachedLimit,
    ADMIN_RATE_LIMIT_PER_MINUTE: unreachedLimit,
    CARD_TESTING_LIMIT_PER_MINUTE: unreachedLimit,
    ...env,
  };
}

/**
 * Starts the real server as a child process, as production runs it: port 0 and `programEnv(env)`.
 */
export async function spawnServer(env: NodeJS.ProcessEnv): Promise<ServerProcess> {
  const child = spawn(process.execPath, [serverProgram], {
    cwd: repositoryRoot,
    // No load balancer is waiting to see it unready: it may stop at once.
    env: programEnv({ PORT: "0", SHUTDOWN_DELAY_MS: "0", ...env }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    for (const stream of [child.stdout!, child.stderr!]) {
      eachLine(stream, (line) => {
        const found = listeningUrl(line);
        if (found !== undefined) resolve(found);
      });
      stream.on("data", (chunk: string) => {
        output += chunk;
      });
    }
    child.once("exit", (code, signal) => reject(new Error(`the server exited (${code ?? signal}) before listening:\n${output}`)));
  });
  const running = () => child.exitCode === null && child.signalCode === null;
  return {
    url,
    pid: child.pid!,
    output: () => output,
    running,
    async kill() {
      if (running()) child.kill("SIGKILL");
      await exited;
    },
    async stop() {
      if (running()) child.kill("SIGTERM");
      await exited;
    },
  };
}
