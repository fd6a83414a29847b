import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { Redis } from "ioredis";
import { freePort } from "./ports.js";
import { answersPing } from "./redis.js";

/*
 * A redis-server of a test's own, on a free loopback port and keeping nothing on disk, that the test
 * may kill, start again and freeze: the shared Redis on 6379 serves everyone else's counters.
 */

/** A test's own Redis. */
export interface RedisServer {
  readonly port: number;
  /** redis://127.0.0.1:<port>, for REDIS_URL. */
  readonly url: string;
  /** Starts it (again, empty) and waits until it answers PING. */
  start(): Promise<void>;
  /** Ends it with SIGKILL, as a crash would, and waits for the exit. */
  kill(): Promise<void>;
  /** SIGSTOP: connections stay open and nothing is answered. */
  freeze(): void;
  thaw(): void;
  /** A client of its own (the caller disconnects it). */
  client(): Redis;
  /** Kills it if it runs; safe to call twice. */
  destroy(): void;
}

/** Starts a redis-server on a free port; it is killed by `destroy`, and in any case when the test process exits. */
export async function startRedisServer(): Promise<RedisServer> {
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  const destroy = (): void => {
    if (child?.exitCode === null && child.signalCode === null) {
      child.kill("SIGCONT");
      child.kill("SIGKILL");
    }
  };
  process.once("exit", destroy);
  const server: RedisServer = {
    port,
    url,
    async start() {
      if (child !== undefined && child.exitCode === null && child.signalCode === null) throw new Error("redis-server is already running");
      let output = "";
      const started = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
        stdio: ["ignore", "pipe", "pipe"],
      });
      child = started;
      started.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
      started.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
      const failed = new Promise<never>((_, reject) => {
        started.once("error", (error) =>
          reject(new Error(`redis-server could not be started (is it installed? bash .ci/prepare installs it): ${error.message}`)),
        );
        started.once("exit", (code) => reject(new Error(`redis-server exited (${code}) while starting:\n${output}`)));
      });
      failed.catch(() => undefined);
      const deadline = Date.now() + 30_000;
      while (!(await Promise.race([answersPing(url), failed]))) {
        if (Date.now() > deadline) throw new Error(`redis-server did not answer PING within 30 s:\n${output}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    async kill() {
      const running = child;
      if (running === undefined || running.exitCode !== null || running.signalCode !== null) return;
      const exited = once(running, "exit");
      running.kill("SIGCONT");
      running.kill("SIGKILL");
      await exited;
    },
    freeze: () => void child?.kill("SIGSTOP"),
    thaw: () => void child?.kill("SIGCONT"),
    client: () => new Redis(url, { maxRetriesPerRequest: 1 }),
    destroy,
  };
  await server.start();
  return server;
}
