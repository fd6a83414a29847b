import * as http from "node:http";
import { createFixtures, fixtureStrings, type Fixtures } from "./fixtures.js";
import { reproducer, type FuzzRequest } from "./fuzz-request.js";
import { Senders, answerDeadlineMs, type Rebinding } from "./senders.js";
import { ServerOutput, ServerProcess } from "./server-process.js";

/**
 * Maps the fixture values requests were generated with to the values of the fixtures on the server
 * running now. Ids and keys of one kind have one length, so binary protobuf stays well-formed.
 */
class FixtureRebinding implements Rebinding {
  private pairs: [string, string][] = [];
  private bytePairs: [Buffer, Buffer][] = [];

  /** Pairs the original fixtures with a newly created set, value by value. */
  rebind(original: Fixtures, current: Fixtures): void {
    const before = fixtureStrings(original);
    const after = fixtureStrings(current);
    // Longest first: a client secret contains its payment's id, and must be replaced whole.
    this.pairs = before
      .map((value, i): [string, string] => [value, after[i]!])
      .filter(([a, b]) => a !== b)
      .sort(([a], [b]) => b.length - a.length);
    this.bytePairs = this.pairs.map(([a, b]) => [Buffer.from(a), Buffer.from(b)]);
  }

  text(text: string): string {
    let out = text;
    for (const [from, to] of this.pairs) if (out.includes(from)) out = out.split(from).join(to);
    return out;
  }

  bytes(bytes: Uint8Array): Uint8Array {
    if (this.bytePairs.length === 0) return bytes;
    const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let out: Buffer | undefined;
    for (const [from, to] of this.bytePairs) {
      let at = (out ?? view).indexOf(from);
      if (at < 0) continue;
      out ??= Buffer.from(view);
      while (at >= 0) {
        to.copy(out, at);
        at = out.indexOf(from, at + to.length);
      }
    }
    return out ?? bytes;
  }
}

/**
 * The server under test with its fixtures. A crash is part of what the fuzzer finds, so the target
 * can start the server again (re-creating the fixtures when the database was in memory) to shrink
 * the failing batch and, in collect mode, to go on.
 */
export class FuzzTarget {
  private readonly rebinding = new FixtureRebinding();
  /** Ids, keys and secrets as the arbitraries were built with them. */
  readonly fixtures: Fixtures;
  private current: Fixtures;
  private serverProcess: ServerProcess;
  private senders: Senders;
  /** How many times the server had to be started again after it died, and how long that took. */
  restarts = 0;
  restartMillis = 0;

  private constructor(
    readonly adminApiKey: string,
    readonly output: ServerOutput,
    private readonly concurrency: number,
    server: ServerProcess,
    fixtures: Fixtures,
  ) {
    this.serverProcess = server;
    this.fixtures = fixtures;
    this.current = fixtures;
    this.senders = new Senders(server.url, concurrency, this.rebinding);
  }

  /** Starts the server and creates the fixtures through its API. */
  static async start(concurrency: number): Promise<FuzzTarget> {
    const adminApiKey = `fuzz-admin-key-${process.pid}`;
    const output = new ServerOutput();
    const server = await ServerProcess.start(adminApiKey, output);
    try {
      return new FuzzTarget(adminApiKey, output, concurrency, server, await createFixtures(server.url, adminApiKey));
    } catch (error) {
      await server.stop();
      throw error;
    }
  }

  get server(): ServerProcess {
    return this.serverProcess;
  }

  get requestSenders(): Senders {
    return this.senders;
  }

  /**
   * Starts the server again if it died. On PostgreSQL the fixtures survive; on the in-memory
   * database they are created again and requests are rebound to the new ids and keys.
   */
  async ensureRunning(): Promise<void> {
    if (this.serverProcess.exited === undefined) return;
    const started = performance.now();
    this.senders.close();
    this.serverProcess = await ServerProcess.start(this.adminApiKey, this.output);
    this.restarts++;
    if ((await this.healthProblem(this.serverProcess.url, this.current.keys.sandboxSecret)) !== undefined) {
      this.current = await createFixtures(this.serverProcess.url, this.adminApiKey);
      this.rebinding.rebind(this.fixtures, this.current);
    }
    this.senders = new Senders(this.serverProcess.url, this.concurrency, this.rebinding);
    this.restartMillis += performance.now() - started;
  }

  /** A command that sends `request` again to the server running now, with its current ids and keys. */
  reproducer(request: FuzzRequest): string {
    const { wire } = request;
    const rebound: FuzzRequest["wire"] =
      wire.kind === "socket"
        ? { ...wire, bytes: this.rebinding.bytes(wire.bytes) }
        : wire.kind === "http2"
          ? { ...wire, headers: this.reboundHeaders(wire.headers), body: this.rebinding.bytes(wire.body) }
          : {
              ...wire,
              target: this.rebinding.text(wire.target),
              headers: this.reboundHeaders(wire.headers),
              body: wire.body === undefined ? undefined : this.rebinding.bytes(wire.body),
            };
    return reproducer({ ...request, wire: rebound }, this.serverProcess.url, { writeFiles: true });
  }

  /** Why GET /health with the valid sandbox key did not answer 200 in time, or undefined when it did. */
  health(): Promise<string | undefined> {
    return this.healthProblem(this.serverProcess.url, this.current.keys.sandboxSecret);
  }

  async stop(): Promise<void> {
    this.senders.close();
    await this.serverProcess.stop();
  }

  private reboundHeaders(headers: readonly (readonly [string, string])[]): [string, string][] {
    return headers.map(([name, value]) => [name, this.rebinding.text(value)]);
  }

  private healthProblem(baseUrl: string, apiKey: string): Promise<string | undefined> {
    return new Promise((resolve) => {
      const request = http.get(`${baseUrl}/health`, { headers: { "api-key": apiKey }, agent: false }, (response) => {
        response.resume();
        response.on("end", () => resolve(response.statusCode === 200 ? undefined : `GET /health answered ${response.statusCode}`));
      });
      request.setTimeout(answerDeadlineMs, () => request.destroy(new Error(`no answer within ${answerDeadlineMs} ms`)));
      request.on("error", (error) => resolve(`GET /health failed: ${error.message}`));
    });
  }
}
