import * as http from "node:http";
import * as http2 from "node:http2";
import type { FuzzRequest, Http1Wire, Http2Wire } from "./fuzz-request.js";
import { sendRaw, toHeaders } from "../support/wire.js";

/** Every request must be answered within this time (oracle 2). */
export const answerDeadlineMs = 2_000;

/** What came back for one request. */
export interface Answer {
  /** HTTP status; 0 when nothing came back. */
  readonly status: number;
  readonly headers: Headers;
  readonly body: Buffer;
  /** HTTP/2 trailers (gRPC); gRPC-Web carries its trailers in the body. */
  readonly trailers: Headers | undefined;
  /** Why there is no (complete) answer: a timeout, a reset, a refused connection. */
  readonly failure: string | undefined;
  /**
   * The request a kept-alive connection carried before this one: a server that leaves part of a
   * request unread stalls the next request on its connection, which then fails for the other's fault.
   */
  readonly previousOnConnection?: FuzzRequest;
}

/**
 * Replaces the fixture ids and keys a request was generated with by those of the server running
 * now; the identity until a crash forced a restart on an empty database.
 */
export interface Rebinding {
  text(text: string): string;
  bytes(bytes: Uint8Array): Uint8Array;
}

/**
 * Sends requests over the transport each protocol uses: kept-alive HTTP/1.1 connections (REST,
 * Connect, gRPC-Web), HTTP/2 prior-knowledge connections (gRPC), and fresh sockets for raw bytes.
 */
export class Senders {
  private readonly agent: http.Agent;
  private readonly lastRequestOn = new WeakMap<object, FuzzRequest>();
  private readonly port: number;

  constructor(
    private readonly baseUrl: string,
    concurrency: number,
    private readonly rebinding: Rebinding,
  ) {
    this.agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
    this.port = Number(new URL(baseUrl).port);
  }

  /** Sends one request and waits for its whole answer, at most answerDeadlineMs. */
  send(request: FuzzRequest): Promise<Answer> {
    const { wire } = request;
    switch (wire.kind) {
      case "http1":
        return this.sendHttp1(request, wire, true);
      case "http2":
        return this.sendHttp2(wire);
      case "socket":
        return sendRaw(this.port, this.rebinding.bytes(wire.bytes), wire.leavesBodyUnsent, answerDeadlineMs).then((raw) => ({
          ...raw,
          trailers: undefined,
        }));
    }
  }

  /** Closes kept-alive connections. */
  close(): void {
    this.agent.destroy();
  }

  private sendHttp1(fuzzRequest: FuzzRequest, wire: Http1Wire, retryOnStaleConnection: boolean): Promise<Answer> {
    const headers: Record<string, string | string[]> = {};
    for (const [name, raw] of wire.headers) {
      const value = this.rebinding.text(raw);
      const existing = headers[name];
      headers[name] = existing === undefined ? value : [...(Array.isArray(existing) ? existing : [existing]), value];
    }
    const body = wire.body === undefined ? undefined : this.rebinding.bytes(wire.body);
    if (body !== undefined) headers["content-length"] = String(body.length);
    return new Promise((resolve) => {
      let settled = false;
      let previousOnConnection: FuzzRequest | undefined;
      const finish = (answer: Answer): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        const stalled = answer.failure?.startsWith("no answer within") === true;
        resolve(stalled && previousOnConnection !== undefined ? { ...answer, previousOnConnection } : answer);
      };
      const request = http.request(
        { agent: this.agent, host: "127.0.0.1", port: this.port, method: wire.method, path: this.rebinding.text(wire.target), headers },
        (response) => {
          const chunks: Buffer[] = [];
          response.on("data", (chunk: Buffer) => chunks.push(chunk));
          response.on("end", () =>
            finish({
              status: response.statusCode ?? 0,
              headers: toHeaders(response.headers),
              body: Buffer.concat(chunks),
              trailers: undefined,
              failure: undefined,
            }),
          );
          response.on("error", (error) =>
            finish({
              status: response.statusCode ?? 0,
              headers: toHeaders(response.headers),
              body: Buffer.concat(chunks),
              trailers: undefined,
              failure: `the answer broke off: ${error.message}`,
            }),
          );
        },
      );
      const timer = setTimeout(() => {
        request.destroy();
        finish(noAnswer(`no answer within ${answerDeadlineMs} ms`));
      }, answerDeadlineMs);
      request.on("socket", (socket) => {
        previousOnConnection = this.lastRequestOn.get(socket);
        this.lastRequestOn.set(socket, fuzzRequest);
      });
      request.on("error", (error: NodeJS.ErrnoException) => {
        // A kept-alive connection the server closed just as it was reused is the client's race, not
        // the server's failure: node's documentation recommends one retry on a fresh connection.
        if (retryOnStaleConnection && request.reusedSocket && error.code === "ECONNRESET" && !settled) {
          settled = true;
          clearTimeout(timer);
          resolve(this.sendHttp1(fuzzRequest, wire, false));
          return;
        }
        // Node answers a request head over its 16 KiB limit with 431 and closes at once, so the
        // client, still sending, often gets a reset instead: the answer the parser gave is lost.
        const headBytes = wire.target.length + wire.headers.reduce((n, [name, value]) => n + name.length + value.length + 4, 0);
        const oversized = headBytes > 16 * 1024 ? " after sending a request head over 16 KiB" : "";
        finish(noAnswer(`connection failed without an answer${oversized}: ${error.code ?? error.message}`));
      });
      request.end(body);
    });
  }

  /**
   * One connection per call: a server that answers one stream with GOAWAY would otherwise fail
   * every other call in flight on the connection and blame innocent requests.
   */
  private sendHttp2(wire: Http2Wire): Promise<Answer> {
    const session = http2.connect(this.baseUrl);
    session.on("error", () => session.destroy());
    return new Promise((resolve) => {
      let settled = false;
      let responseHeaders: http2.IncomingHttpHeaders | undefined;
      let trailers: Headers | undefined;
      const chunks: Buffer[] = [];
      const answered = (): Answer | undefined =>
        responseHeaders === undefined
          ? undefined
          : {
              status: Number(responseHeaders[":status"] ?? 0),
              headers: toHeaders(responseHeaders),
              body: Buffer.concat(chunks),
              trailers,
              failure: undefined,
            };
      const finish = (answer: Answer): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        session.close();
        resolve(answer);
      };
      const outgoing: http2.OutgoingHttpHeaders = { ":method": "POST", ":path": wire.path };
      for (const [name, value] of wire.headers) outgoing[name.toLowerCase()] = this.rebinding.text(value);
      let stream: http2.ClientHttp2Stream;
      try {
        stream = session.request(outgoing);
      } catch (error) {
        resolve(noAnswer(`the HTTP/2 stream could not be opened: ${String(error)}`));
        return;
      }
      const timer = setTimeout(() => {
        stream.close(http2.constants.NGHTTP2_CANCEL);
        finish(noAnswer(`no answer within ${answerDeadlineMs} ms`));
      }, answerDeadlineMs);
      stream.on("response", (headers) => {
        responseHeaders = headers;
      });
      stream.on("trailers", (headers) => {
        trailers = toHeaders(headers);
      });
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      // Whatever arrived before the stream ended or broke is the answer: a missing trailer is then
      // judged as the missing grpc-status it is.
      const ended = (why: string): void => finish(answered() ?? noAnswer(why));
      stream.on("end", () => ended("the HTTP/2 stream ended without response headers"));
      stream.on("error", (error: NodeJS.ErrnoException) =>
        ended(`the HTTP/2 stream failed without an answer: ${error.code ?? error.message}`),
      );
      stream.on("close", () => ended(`the HTTP/2 stream was closed without an answer (code ${stream.rstCode})`));
      stream.end(this.rebinding.bytes(wire.body));
    });
  }
}

function noAnswer(failure: string): Answer {
  return { status: 0, headers: new Headers(), body: Buffer.alloc(0), trailers: undefined, failure };
}
