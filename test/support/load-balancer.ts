import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { freePort } from "./ports.js";
import { tmpdir } from "node:os";
import { join } from "node:path";

/*
 * HAProxy from Debian (installed by .ci/prepare), run as a child process with a configuration of its
 * own in a temporary directory, in front of backends that serve HTTP/1.1 and h2c on one port, as the
 * service does. It is the load balancer of the end-to-end suite's haproxy topology (service.ts) and of
 * the scale-out benchmark (bench/).
 */

/** A running HAProxy and the address clients call. */
export interface LoadBalancer {
  /** Where clients call it: HTTP/1.1 and h2c (prior knowledge) on one port, as on one instance. */
  readonly url: string;
  /** How many backends HAProxy's checks see ready now: it routes calls to those only. */
  serversUp(): Promise<number>;
  /** Stops HAProxy and removes its configuration; with HAPROXY_LOG_DIR set, first writes its log (every request, every server going up or down) there. */
  close(): Promise<void>;
}

/**
 * The readiness check: the standard gRPC health service over Connect's JSON (one POST, no API key),
 * which answers SERVING only while the instance's database answers, its migrations are applied and
 * it is not shutting down (src/health/readiness.ts).
 */
const healthCheck = [
  "option httpchk",
  'http-check send meth POST uri /grpc.health.v1.Health/Check ver HTTP/1.1 hdr host lb-check hdr content-type application/json body "{}"',
  'http-check expect rstring "\\"status\\":\\s*\\"SERVING\\""',
];

/**
 * HAProxy's configuration: one frontend for both protocols; requests that arrive over HTTP/2 go to
 * the backends over h2c (gRPC needs HTTP/2 and trailers), HTTP/1.x ones over HTTP/1.1 (gRPC-Web,
 * Connect and REST clients that speak it). Both backend sections are the same servers, round robin;
 * the h2 section follows the health of the HTTP/1.1 one rather than probing again.
 */
function configuration(port: number, backends: readonly URL[], stateSocket: string): string {
  const servers = (proto: "h1" | "h2") =>
    backends.map((backend, i) =>
      proto === "h1"
        ? `  server i${i} ${backend.hostname}:${backend.port} check inter 1s fall 3 rise 1`
        : `  server i${i} ${backend.hostname}:${backend.port} proto h2 track h1/i${i}`,
    );
  return [
    "global",
    "  maxconn 4000",
    `  stats socket ${stateSocket} level user`,
    "  log stderr format raw local0 info",
    "defaults",
    "  mode http",
    "  log global",
    "  option httplog",
    // The client's address for the instances' per-address limits (they trust it: TRUSTED_PROXIES).
    "  option forwardfor",
    "  timeout connect 5s",
    // Server streams (StreamEvents, Health/Watch) stay open as long as their client wants, and a
    // deadline test may hold a call for a while: an hour is longer than any of them.
    "  timeout client 1h",
    "  timeout server 1h",
    "  timeout tunnel 1h",
    "  timeout http-request 1m",
    "  timeout http-keep-alive 1m",
    // The service answers a probe within a second (its database gets 800 ms); the margin is for a
    // busy, shared machine, where a late answer is not a dead instance.
    "  timeout check 3s",
    // A backend that went away (stopped, killed) is retried on another, like a real deployment does.
    "  retries 2",
    "  option redispatch",
    "frontend api",
    // No ALPN on a clear-text bind: HAProxy tells HTTP/2 prior knowledge by its preface, HTTP/1.x otherwise.
    `  bind 127.0.0.1:${port}`,
    '  use_backend h2 if { req.ver "2.0" }',
    "  default_backend h1",
    "backend h1",
    "  balance roundrobin",
    ...healthCheck,
    ...servers("h1"),
    "backend h2",
    "  balance roundrobin",
    ...servers("h2"),
    "",
  ].join("\n");
}

/** Sends one command to HAProxy's stats socket and returns its answer. */
function askHaproxy(socketPath: string, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let answer = "";
    const socket = connect(socketPath, () => socket.end(`${command}\n`));
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      answer += chunk;
    });
    socket.once("error", reject);
    socket.once("end", () => resolve(answer));
  });
}

/** How many servers of the h1 section HAProxy's checks currently see UP. */
async function serversUp(socketPath: string): Promise<number> {
  const stat = await askHaproxy(socketPath, "show stat");
  return stat.split("\n").filter((line) => {
    // CSV: proxy name, server name, …, status (the 18th field).
    const fields = line.split(",");
    return fields[0] === "h1" && fields[1] !== "BACKEND" && fields[17] === "UP";
  }).length;
}

/** How long HAProxy may take to start and to see every backend ready: a slow, shared machine. */
const readyDeadlineMs = 30_000;

/**
 * Starts HAProxy on `port` (a free one when not given) in front of `backends` (base URLs such as
 * http://127.0.0.1:8080), and resolves once every backend passes its readiness check, so that round
 * robin spreads calls over all of them from the first one.
 */
export async function startLoadBalancer(backends: readonly string[], port?: number): Promise<LoadBalancer> {
  const dir = await mkdtemp(join(tmpdir(), "haproxy-"));
  const stateSocket = join(dir, "stats.sock");
  const listenPort = port ?? (await freePort());
  const configFile = join(dir, "haproxy.cfg");
  await writeFile(
    configFile,
    configuration(
      listenPort,
      backends.map((backend) => new URL(backend)),
      stateSocket,
    ),
  );
  const child = spawn("haproxy", ["-db", "-f", configFile], { stdio: ["ignore", "ignore", "pipe"] });
  let output = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk: string) => {
    output += chunk;
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const spawnFailed = new Promise<never>((_, reject) => child.once("error", reject));
  const close = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
    await rm(dir, { recursive: true, force: true });
    if (process.env.HAPROXY_LOG_DIR !== undefined) await writeFile(join(process.env.HAPROXY_LOG_DIR, `haproxy-${listenPort}.log`), output);
  };
  try {
    const deadline = Date.now() + readyDeadlineMs;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`haproxy exited (${child.exitCode}):\n${output}`);
      const up = await Promise.race([serversUp(stateSocket).catch(() => 0), spawnFailed]);
      if (up === backends.length) break;
      if (Date.now() > deadline)
        throw new Error(`haproxy sees ${up} of ${backends.length} backends ready after ${readyDeadlineMs} ms:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } catch (error) {
    await close();
    throw error;
  }
  return { url: `http://127.0.0.1:${listenPort}`, serversUp: () => serversUp(stateSocket), close };
}
