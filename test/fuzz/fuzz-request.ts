import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as fc from "fast-check";
import type { ApiMethod } from "./schema.js";

/** The protocol a request speaks, which decides how its answer is judged. */
export type Protocol = "rest" | "connect" | "grpc" | "grpc-web" | "raw-http";

/** A request line, headers and body sent with node:http over a kept-alive HTTP/1.1 connection. */
export interface Http1Wire {
  readonly kind: "http1";
  readonly method: string;
  /** The request target exactly as it goes on the request line (origin-form, absolute-form or `*`). */
  readonly target: string;
  readonly headers: readonly (readonly [string, string])[];
  readonly body: Uint8Array | undefined;
}

/** A stream on an HTTP/2 prior-knowledge (h2c) connection: gRPC. */
export interface Http2Wire {
  readonly kind: "http2";
  readonly path: string;
  readonly headers: readonly (readonly [string, string])[];
  readonly body: Uint8Array;
}

/** Bytes written as they are to a fresh TCP connection: requests node:http refuses to send. */
export interface SocketWire {
  readonly kind: "socket";
  readonly bytes: Uint8Array;
  /** The request declares more body than it sends: the server must answer and close without waiting. */
  readonly leavesBodyUnsent: boolean;
}

/** One generated request with what the oracle needs to judge its answer. */
export interface FuzzRequest {
  readonly protocol: Protocol;
  /** Short, stable description for statistics and violation kinds, e.g. `POST /payments/{payment_id}/capture`. */
  readonly label: string;
  /**
   * What makes the request most unusual whatever its route (`URL //`, `id "%00"`, a raw case),
   * when something does: a request that killed the server is recognised by it in collect mode.
   */
  readonly variant: string | undefined;
  /** The RPC the request is meant for, when there is one; its input fields are what IR_04/IR_05 may name. */
  readonly method: ApiMethod | undefined;
  /** The URL was mangled beyond the route's own path, so it may reach another method or none. */
  readonly pathMangled: boolean;
  /** Card numbers the request carries in card_number fields: none may come back or reach the log. */
  readonly cardNumbers: readonly string[];
  /** How an answer to a malformed raw request is judged: as a REST or a Connect error. */
  readonly answeredAs: "rest" | "connect" | "grpc";
  readonly wire: Http1Wire | Http2Wire | SocketWire;
}

/**
 * Gives a request a short printable form, so fast-check's counterexample report shows readable
 * commands instead of kilobytes of byte arrays.
 */
export function printable(request: FuzzRequest): FuzzRequest {
  return Object.assign(request, { [fc.toStringMethod]: () => reproducer(request, "$URL", { writeFiles: false }) });
}

/** Bodies longer than this go to a file next to the reproducer instead of into the command line. */
const inlineBodyLimit = 400;

/**
 * A shell command that sends the request again (curl, or node for raw bytes). With `writeFiles`, long
 * or binary bodies are written to the temp directory and referenced, so the command is complete.
 */
export function reproducer(request: FuzzRequest, baseUrl: string, { writeFiles }: { writeFiles: boolean }): string {
  const command = reproducerCommand(request, baseUrl, writeFiles);
  if (command.length <= longCommand) return command;
  const shown = `${command.slice(0, 200)}… (${command.length} characters)`;
  return writeFiles ? `sh ${saveFile(Buffer.from(`${command}\n`), "sh")}   # ${shown}` : shown;
}

/** Commands longer than this (10,000-character ids, long query strings) are written to a script. */
const longCommand = 2_000;

function reproducerCommand(request: FuzzRequest, baseUrl: string, writeFiles: boolean): string {
  const { wire } = request;
  const host = new URL(baseUrl.startsWith("$") ? "http://127.0.0.1:0" : baseUrl);
  const bodyArgument = (body: Uint8Array, flag: string): string => {
    if (body.length <= inlineBodyLimit && isPrintableAscii(body)) return `${flag} ${shellQuote(Buffer.from(body).toString("latin1"))}`;
    if (!writeFiles) return `${flag} @<${body.length} bytes: ${preview(body)}>`;
    return `${flag} @${saveFile(body, "bin")}`;
  };
  switch (wire.kind) {
    case "http1":
    case "http2": {
      const args = ["curl", "-sS", "-i"];
      if (wire.kind === "http2") args.push("--http2-prior-knowledge");
      const target = wire.kind === "http1" ? wire.target : wire.path;
      const method = wire.kind === "http1" ? wire.method : "POST";
      args.push("-X", shellQuote(method));
      if (target.startsWith("/") && !/\/\/|\/\.\.?(\/|$)|\\/.test(target)) {
        args.push(shellQuote(baseUrl + target));
      } else {
        args.push("--path-as-is", "--request-target", shellQuote(target), shellQuote(baseUrl));
      }
      for (const [name, value] of wire.headers) args.push("-H", shellQuote(`${name}: ${value}`));
      if (!wire.headers.some(([name]) => name.toLowerCase() === "content-type")) args.push("-H", "'content-type:'");
      if (wire.body !== undefined && wire.body.length > 0) args.push(bodyArgument(wire.body, "--data-binary"));
      return args.join(" ");
    }
    case "socket": {
      // node rather than nc: node is on every machine that runs the service, nc is not.
      const port = baseUrl.startsWith("$") ? "$PORT" : host.port;
      const bytes = Buffer.from(wire.bytes);
      const send = (load: string) =>
        `node -e 'const s = require("net").connect(${port}, "127.0.0.1", () => s.write(${load})); s.pipe(process.stdout); setTimeout(() => s.destroy(), 5000)'`;
      if (bytes.length <= inlineBodyLimit) return `${send('Buffer.from(process.argv[1], "base64")')} ${bytes.toString("base64")}`;
      if (!writeFiles) return `${send("<file>")}   # ${bytes.length} bytes: ${preview(bytes)}`;
      return `${send('require("fs").readFileSync(process.argv[1])')} ${saveFile(bytes, "bin")}`;
    }
  }
}

function isPrintableAscii(bytes: Uint8Array): boolean {
  return bytes.every((b) => b >= 0x20 && b < 0x7f);
}

function preview(bytes: Uint8Array): string {
  return JSON.stringify(Buffer.from(bytes.subarray(0, 80)).toString("latin1")) + (bytes.length > 80 ? "…" : "");
}

function saveFile(content: Uint8Array, extension: string): string {
  const path = join(tmpdir(), `fuzz-${createHash("sha256").update(content).digest("hex").slice(0, 16)}.${extension}`);
  writeFileSync(path, content);
  return path;
}

function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}
