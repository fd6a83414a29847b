import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import { invalidRequest } from "../errors.js";
import { toConnectError, toRestError } from "./errors.js";

/** A request handler both protocols can call, as produced by connect-node's universal adapters. */
export type DualProtocolHandler = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void;

/** Tuning for a service that sits behind a load balancer, and limits that keep abusive clients from starving it. */
export interface DualProtocolServerOptions {
  /**
   * Time a connection may sit without a request before it is closed, the wait for its first byte
   * included; must exceed the load balancer's (AWS ALB: 60 s), so it never reuses a connection we
   * are closing.
   */
  idleTimeoutMs?: number;
  /** Time a request's headers may take once its first byte has arrived (slowloris). */
  headersTimeoutMs?: number;
  /** Time a whole request, headers and body, may take to arrive (a body trickled byte by byte). */
  requestTimeoutMs?: number;
  /** Connections held open at most; see createDualProtocolServer. */
  maxConnections?: number;
  /** Streams an HTTP/2 connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxConcurrentStreams?: number;
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

/**
 * How often Node's HTTP/1.1 server looks for requests past their header or request deadline (its
 * default, 30 s, would let a 10 s deadline run to 40 s). Its sweep visits only requests in progress.
 */
const deadlineSweepMs = 1_000;

/**
 * Serves HTTP/1.1 and HTTP/2 prior knowledge on one plaintext port, which Node's own servers can't
 * share, and bounds what a client can hold: a connection without a request for `idleTimeoutMs` is
 * closed (HTTP/1.1 keep-alive, an HTTP/2 session, a connection that never sent a byte); a request
 * whose headers take longer than `headersTimeoutMs`, or whose body is not in by `requestTimeoutMs`,
 * is cut off (HTTP/1.1: 408 and the connection closed; HTTP/2: the stream reset). At
 * `maxConnections`, a new connection displaces an older one without a request in progress, so
 * that idle connections never lock clients out: the oldest of those that have not made a request
 * yet (waiting for a first byte, still sending headers), else the one idle longest between
 * requests. Only when every connection has a request in progress is the new one closed at once.
 */
export function createDualProtocolServer(
  handler: DualProtocolHandler,
  {
    idleTimeoutMs = 65_000,
    headersTimeoutMs = 10_000,
    requestTimeoutMs = 30_000,
    maxConnections = 10_000,
    maxConcurrentStreams = 100,
    onRefused = () => "",
  }: DualProtocolServerOptions = {},
): DualProtocolServer {
  let closing = false;
  const sockets = new Set<net.Socket>();
  const sniffing = new Set<net.Socket>();
  const sessions = new Set<http2.ServerHttp2Session>();
  // Connections without a request in progress, each the oldest first (a Set keeps insertion order):
  // those that have not yet made a request, and those idle between requests.
  const fresh = new Set<net.Socket>();
  const idle = new Set<net.Socket>();
  const becomeBusy = (socket: net.Socket): void => {
    fresh.delete(socket);
    idle.delete(socket);
  };
  const becomeIdle = (socket: net.Socket): void => {
    idle.delete(socket);
    if (sockets.has(socket)) idle.add(socket);
  };
  const forget = (socket: net.Socket): void => {
    sockets.delete(socket);
    sniffing.delete(socket);
    becomeBusy(socket);
  };

  // A request without Host reaches the handler (HTTP/1.0 needs none; an RPC without one gets the
  // documented IR_06 there), instead of Node's bare 400.
  const h1 = http.createServer(
    {
      requireHostHeader: false,
      headersTimeout: headersTimeoutMs,
      requestTimeout: requestTimeoutMs,
      connectionsCheckingInterval: deadlineSweepMs,
    },
    (req, res) => {
      // Node lets go of req.socket once the answer is finished.
      const socket = req.socket;
      becomeBusy(socket);
      res.once("finish", () => {
        // A connection busy when close() is called would otherwise sit idle until the force timeout.
        if (closing) socket.end();
        if (!req.complete && closesConnection(res)) lingerOverUnreadBody(req, socket);
      });
      res.once("close", () => becomeIdle(socket));
      handler(req, res);
    },
  );
  h1.keepAliveTimeout = idleTimeoutMs;
  answerUnservableRequests(h1, onRefused);

  const h2 = http2.createServer({ settings: { maxConcurrentStreams } }, handler);
  // http2 creates a connection's session synchronously as it is handed the connection.
  let handingOver: net.Socket | undefined;
  h2.on("session", (session) => {
    const socket = handingOver!;
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
    // GOAWAY rather than destroy: streams still open on an idle session may finish.
    session.setTimeout(idleTimeoutMs, () => session.close());
    let open = 0;
    session.on("stream", (stream) => {
      open++;
      becomeBusy(socket);
      const deadline = setTimeout(() => cutUnfinishedStream(stream), requestTimeoutMs);
      stream.once("close", () => {
        clearTimeout(deadline);
        if (--open === 0) becomeIdle(socket);
      });
    });
  });

  // Nagle's algorithm would hold back small RPC frames; http.Server disables it too.
  const server = net.createServer({ noDelay: true }, (socket) => {
    if (sockets.size >= maxConnections) {
      // A client that has made requests (a load balancer's kept-alive connection) outranks one that
      // has made none yet (an idle flood, a slowloris still sending its headers).
      const displaced = fresh.values().next().value ?? idle.values().next().value;
      if (displaced === undefined) {
        socket.destroy();
        return;
      }
      forget(displaced);
      displaced.destroy();
    }
    sockets.add(socket);
    sniffing.add(socket);
    fresh.add(socket);
    socket.once("close", () => forget(socket));
    sniff(socket, idleTimeoutMs, (isHttp2) => {
      sniffing.delete(socket);
      if (isHttp2) {
        // http2 drains the unshifted bytes with socket.read(); resuming would emit them to no one.
        handingOver = socket;
        h2.emit("connection", socket);
        handingOver = undefined;
      } else {
        h1.emit("connection", socket);
        // http consumes the handle natively; resuming flushes the unshifted bytes before any new read.
        socket.resume();
      }
    });
  });
  // http.Server enforces headersTimeout and requestTimeout and tracks idle connections only once it has "listened".
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

/** How long a connection answered before its body was read keeps reading (and dropping) what the client still sends. */
const lingerMs = 1_000;

/** Whether Node closes the connection after this answer: it says `connection: close`, or keep-alive was off. */
function closesConnection(res: http.ServerResponse): boolean {
  return !res.shouldKeepAlive || /\bclose\b/i.test(String(res.getHeader("connection") ?? ""));
}

/**
 * Closes an HTTP/1.1 connection answered before its request body was read (a 413, a refusal) only
 * after reading and dropping what the client still sends for a moment. Node would close it as soon
 * as the answer is written, and closing a socket with unread data sends a reset, which makes the
 * client's system drop the answer before the client has read it: it would see "connection reset"
 * instead of the 413. (Node's destroySoon() waits for "finish" to destroy; that wait is replaced.)
 */
function lingerOverUnreadBody(req: http.IncomingMessage, socket: net.Socket): void {
  if (socket.destroyed) return;
  socket.removeListener("finish", socket.destroy);
  const close = (): void => {
    clearTimeout(timer);
    socket.destroy();
  };
  const timer = setTimeout(close, lingerMs);
  req.on("data", ignore);
  req.resume();
  socket.once("end", close);
  socket.once("close", () => clearTimeout(timer));
}

/**
 * Resets an HTTP/2 stream whose request has not fully arrived by its deadline (RST_STREAM CANCEL):
 * HTTP/2 has no place for a 408 once the handler owns the stream, and a stream whose request is in
 * (a server stream still answering) is left alone.
 */
function cutUnfinishedStream(stream: http2.ServerHttp2Stream): void {
  if (stream.closed || stream.endAfterHeaders || stream.state.remoteClose === 1) return;
  stream.close(http2.constants.NGHTTP2_CANCEL);
}

/**
 * Reads just enough of a new connection to tell the HTTP/2 preface from an HTTP/1 request line, then
 * puts it back. The bytes must come within `timeoutMs` of the connection, however they are spread:
 * a preface trickled a byte at a time does not hold the connection longer.
 */
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
    socket.off("close", stopTimer);
    clearTimeout(timer);
    socket.pause();
    socket.unshift(head);
    decide(isPrefix);
  };
  const timer = setTimeout(() => socket.destroy(), timeoutMs);
  const stopTimer = (): void => clearTimeout(timer);
  socket.on("data", onData);
  // Until handed over no server listens for errors; the socket destroys itself regardless.
  socket.on("error", ignore);
  socket.once("close", stopTimer);
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
    // A request past its deadline has a handler, whose log line would otherwise give its status as 200.
    const inFlightResponse = inFlight.get(socket);
    if (inFlightResponse !== undefined) inFlightResponse.statusCode = status;
    // Its handler logs and counts it, under the id it already has; any other is refused before a handler.
    const requestId = inFlightResponse === undefined ? onRefused(status) : String(inFlightResponse.getHeader("x-request-id") ?? "");
    writeRawError(socket, status, message, requestId, head);
  });
  h1.on("checkExpectation", (req: http.IncomingMessage, res: http.ServerResponse) => {
    const requestId = onRefused(417);
    const body = errorBody(`Expect: ${req.headers.expect ?? ""} cannot be met; only 100-continue is supported`, requestId);
    res.writeHead(417, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
      "x-request-id": requestId,
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

function errorBody(message: string, requestId: string): string {
  return JSON.stringify(toRestError(toConnectError(invalidRequest(message), requestId || undefined)).body);
}

/** How long a refused client may stay quiet before its socket closes. */
const lingerQuietMs = 1_000;
/** How long a refused client may keep sending in all, so that a client that never stops cannot hold a socket. */
const lingerMostMs = 10_000;

/**
 * Answers on a socket no handler owns, then closes it. What the client still sends is read and
 * dropped until it has been quiet for a second (ten at most): closing a socket with unread data
 * sends a reset, which makes the client lose the answer before reading it, and a client still
 * sending a megabyte of request head on a busy host can take more than a second to finish.
 */
function writeRawError(socket: net.Socket, status: number, message: string, requestId: string, headOnly = false): void {
  const body = errorBody(message, requestId);
  const idHeader = requestId === "" ? "" : `x-request-id: ${requestId}\r\n`;
  const head = `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ""}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${idHeader}connection: close\r\n\r\n`;
  socket.end(headOnly ? head : head + body);
  socket.on("data", ignore);
  socket.resume();
  socket.setTimeout(lingerQuietMs, () => socket.destroy());
  setTimeout(() => socket.destroy(), lingerMostMs).unref();
}
