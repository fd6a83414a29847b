import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import { invalidRequest } from "../errors.js";
import { documentedError, toRestError } from "./errors.js";

/** A request handler both protocols can call, as produced by connect-node's universal adapters. */
export type DualProtocolHandler = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void;

/** Tuning for a service that sits behind a load balancer. */
export interface DualProtocolServerOptions {
  /** Idle time before a kept-alive connection is closed; must exceed the load balancer's (AWS ALB: 60 s) so it never reuses a connection we are closing. */
  idleTimeoutMs?: number;
  /**
   * Told of each request Node's HTTP/1.1 server answers by itself, before any handler (a parse
   * error, an Expect it cannot meet, CONNECT), with the status: it logs and counts the request as the
   * handler would, and returns the request id the answer carries.
   */
  onRefused?: (status: number) => string;
}

/** A plaintext port serving HTTP/1.1 and h2c, with a shutdown that does not wait on idle clients. */
export interface DualProtocolServer {
  /** The TCP listener: call `listen()` on it. */
  readonly server: net.Server;
  /** Stops accepting, lets in-flight requests finish, and destroys what is still open after `graceMs`. */
  close(graceMs?: number): Promise<void>;
}

const preface = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

/** Serves HTTP/1.1 and HTTP/2 prior knowledge on one plaintext port, which Node's own servers can't share. */
export function createDualProtocolServer(
  handler: DualProtocolHandler,
  { idleTimeoutMs = 65_000, onRefused = () => "" }: DualProtocolServerOptions = {},
): DualProtocolServer {
  let closing = false;
  const sockets = new Set<net.Socket>();
  const sniffing = new Set<net.Socket>();
  const sessions = new Set<http2.ServerHttp2Session>();

  // A request without Host reaches the handler (HTTP/1.0 needs none; an RPC without one gets the
  // documented IR_06 there), instead of Node's bare 400.
  const h1 = http.createServer({ requireHostHeader: false }, (req, res) => {
    // A connection busy when close() is called would otherwise sit idle until the force timeout.
    res.once("finish", () => {
      if (closing) req.socket.end();
    });
    handler(req, res);
  });
  h1.keepAliveTimeout = idleTimeoutMs;
  // Longer than keep-alive, so a request starting just as the idle timer fires is not cut mid-headers.
  h1.headersTimeout = idleTimeoutMs + 1_000;
  answerUnservableRequests(h1, onRefused);

  const h2 = http2.createServer(handler);
  h2.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
    // GOAWAY rather than destroy: streams still open on an idle session may finish.
    session.setTimeout(idleTimeoutMs, () => session.close());
  });

  // Nagle's algorithm would hold back small RPC frames; http.Server disables it too.
  const server = net.createServer({ noDelay: true }, (socket) => {
    sockets.add(socket);
    sniffing.add(socket);
    socket.once("close", () => {
      sockets.delete(socket);
      sniffing.delete(socket);
    });
    sniff(socket, h1.headersTimeout, (isHttp2) => {
      sniffing.delete(socket);
      if (isHttp2) {
        // http2 drains the unshifted bytes with socket.read(); resuming would emit them to no one.
        h2.emit("connection", socket);
      } else {
        h1.emit("connection", socket);
        // http consumes the handle natively; resuming flushes the unshifted bytes before any new read.
        socket.resume();
      }
    });
  });
  // http.Server enforces headersTimeout and tracks idle connections only once it has "listened".
  server.on("listening", () => h1.emit("listening"));

  return {
    server,
    async close(graceMs = 5_000) {
      closing = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      h1.close(); // destroys idle keep-alive connections
      for (const session of sessions) session.close();
      for (const socket of sniffing) socket.destroy();
      const force = setTimeout(() => {
        for (const socket of sockets) socket.destroy();
      }, graceMs);
      await closed;
      clearTimeout(force);
    },
  };
}

/** Reads just enough of a new connection to tell the HTTP/2 preface from an HTTP/1 request line, then puts it back. */
function sniff(socket: net.Socket, timeoutMs: number, decide: (isHttp2: boolean) => void): void {
  let head = Buffer.alloc(0);
  const onData = (chunk: Buffer): void => {
    head = Buffer.concat([head, chunk]);
    const length = Math.min(head.length, preface.length);
    const isPrefix = head.subarray(0, length).equals(preface.subarray(0, length));
    // The preface may arrive split over several reads.
    if (isPrefix && length < preface.length) return;
    socket.off("data", onData);
    socket.off("error", ignore);
    socket.off("timeout", onTimeout);
    socket.setTimeout(0);
    socket.pause();
    socket.unshift(head);
    decide(isPrefix);
  };
  const onTimeout = (): void => {
    socket.destroy();
  };
  socket.on("data", onData);
  // Until handed over no server listens for errors; the socket destroys itself regardless.
  socket.on("error", ignore);
  socket.setTimeout(timeoutMs);
  socket.once("timeout", onTimeout);
}

function ignore(): void {}

/**
 * What Node's HTTP/1.1 server answers by itself gets the documented error body too (IR_06): a
 * request its parser refuses (a malformed method or target, an over-long header: Node's 400 and
 * 431), an Expect header it cannot meet (417), and a CONNECT request, which this service never
 * serves (405; Node would close the connection without a word). These come before any handler, so
 * they are written to the socket, which is then closed: after a parse error nothing more on it can
 * be trusted. (An Upgrade request is served as the plain request it also is.)
 */
function answerUnservableRequests(h1: http.Server, onRefused: (status: number) => string): void {
  const inFlight = new WeakMap<net.Socket, http.ServerResponse>();
  // Node's parser reports its error again for every chunk that follows: the first one is answered,
  // the socket then lingers (writeRawError) instead of being reset under the answer.
  const answered = new WeakSet<net.Socket>();
  h1.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
    inFlight.set(req.socket, res);
    res.once("finish", () => inFlight.delete(req.socket));
  });
  h1.on("clientError", (error: ParserError, socket: net.Socket) => {
    if (answered.has(socket)) return;
    // As Node itself: never write into an answer that has begun, nor to a peer that is gone.
    if (error.code === "ECONNRESET" || !socket.writable || inFlight.get(socket)?.headersSent === true) {
      socket.destroy();
      return;
    }
    const [status, message] = clientErrorAnswer(error);
    // A HEAD request's answer has no body, even when it is an error (the client would read on).
    const head = error.rawPacket?.subarray(0, 5).toString("latin1") === "HEAD ";
    answered.add(socket);
    writeRawError(socket, status, message, onRefused(status), head);
  });
  h1.on("checkExpectation", (req: http.IncomingMessage, res: http.ServerResponse) => {
    const body = errorBody(`Expect: ${req.headers.expect ?? ""} cannot be met; only 100-continue is supported`);
    res.writeHead(417, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
      "x-request-id": onRefused(417),
      connection: "close",
    });
    res.end(body);
  });
  h1.on("connect", (_req: http.IncomingMessage, socket: net.Socket) => {
    writeRawError(socket, 405, "The CONNECT method is not served here", onRefused(405));
  });
}

/** What Node's HTTP parser reports of a request it refuses. */
type ParserError = Error & { code?: string; reason?: string; rawPacket?: Buffer };

function clientErrorAnswer(error: ParserError): [number, string] {
  switch (error.code) {
    case "HPE_HEADER_OVERFLOW":
      return [431, "The request headers are too large"];
    case "HPE_CHUNK_EXTENSIONS_OVERFLOW":
      return [413, "The request's chunk extensions are too large"];
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return [408, "The request did not arrive in time"];
    default:
      return [400, `The request is not valid HTTP/1.1${error.reason === undefined ? "" : `: ${error.reason}`}`];
  }
}

function errorBody(message: string): string {
  return JSON.stringify(toRestError(documentedError(invalidRequest(message))).body);
}

/**
 * Answers on a socket no handler owns, then closes it. The rest of what the client sends is read
 * and dropped for a moment first: closing a socket with unread data sends a reset, which can make
 * the client lose the answer before reading it.
 */
function writeRawError(socket: net.Socket, status: number, message: string, requestId: string, headOnly = false): void {
  const body = errorBody(message);
  const idHeader = requestId === "" ? "" : `x-request-id: ${requestId}\r\n`;
  const head = `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ""}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${idHeader}connection: close\r\n\r\n`;
  socket.end(headOnly ? head : head + body);
  socket.on("data", ignore);
  socket.resume();
  setTimeout(() => socket.destroy(), 1_000).unref();
}
