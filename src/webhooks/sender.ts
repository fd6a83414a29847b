import { Agent, type Dispatcher } from "undici";
import { isIP } from "node:net";
import { checkedLookup, hostOf, refusalOf } from "./target.js";

/** What one POST to a receiver came to: the HTTP status it answered, or why it got none. */
export interface Attempt {
  readonly responseStatus: number | null;
  /** Why the attempt failed, in words; null when the receiver answered 2xx. */
  readonly error: string | null;
}

/** Why an attempt without an answer within `timeoutMs` failed. */
function noAnswer(timeoutMs: number): string {
  return `no answer within ${timeoutMs / 1000} s`;
}
/** How much of an answer's body is read: receivers answer a few bytes; more is cut off, never buffered. */
const answerCapBytes = 16 * 1024;

/**
 * Connection pools, one per environment (and attempt timeout, which a process sets once): a
 * connection opened under the sandbox's rules (a private address) must never be reused for a
 * production delivery to the same host and port.
 */
const agents = new Map<string, Agent>();

function agentFor(livemode: boolean, timeoutMs: number): Agent {
  const key = `${livemode} ${timeoutMs}`;
  let agent = agents.get(key);
  if (agent === undefined) {
    // An answer's body never holds its connection longer than an attempt may last.
    agent = new Agent({ connect: { lookup: checkedLookup(livemode) }, bodyTimeout: timeoutMs, headersTimeout: timeoutMs });
    agents.set(key, agent);
  }
  return agent;
}

/** Where an attempt goes, or why it may not go there at all. */
type Destination = { readonly origin: string; readonly path: string } | { readonly refusal: string };

/** Destinations worked out so far, by environment and URL: a profile's deliveries all go to one. */
const destinations = new Map<string, Destination>();
/** Beyond this many, the destinations are worked out afresh: a handful of receivers are in use at a time. */
const destinationsKept = 10_000;

/** A refusal before any connection: production needs https, and an address literal is checked as one. */
function refusalBeforeConnecting(url: URL, livemode: boolean): string | undefined {
  if (livemode && url.protocol !== "https:") return "production events go to https URLs only";
  const host = hostOf(url);
  return isIP(host) === 0 ? undefined : refusalOf(host, livemode);
}

/**
 * Where an attempt for this environment goes, worked out once per URL; a name (rather than an
 * address literal) is judged as it resolves, by `checkedLookup`.
 */
function destinationOf(target: string, livemode: boolean): Destination {
  const key = `${livemode ? "live" : "test"} ${target}`;
  let destination = destinations.get(key);
  if (destination !== undefined) return destination;
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return { refusal: "webhook_url is not a valid URL" };
  }
  const refusal = refusalBeforeConnecting(url, livemode);
  destination = refusal === undefined ? { origin: url.origin, path: `${url.pathname}${url.search}` } : { refusal };
  if (destinations.size >= destinationsKept) destinations.clear();
  destinations.set(key, destination);
  return destination;
}

/** Words for a failure a receiver's user can act on. */
function describe(error: unknown, timeoutMs: number): string {
  const code = (error as { code?: string }).code;
  // undici's own limits are the attempt's: whichever ends it first, the receiver hears the same words.
  if (code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_CONNECT_TIMEOUT") return noAnswer(timeoutMs);
  if (code === "ECONNREFUSED") return "connection refused";
  if (code === "ENOTFOUND" || code === "EAI_AGAIN") return "host not found";
  if (code === "ECONNRESET") return "connection reset";
  return error instanceof Error ? error.message : String(error);
}

/**
 * Follows one attempt as undici reports it. The answer's status decides the attempt as soon as it
 * arrives; its body is only drained, so the connection can serve the next delivery, and cut off past
 * `answerCapBytes`. No stream, promise or abort signal is made per attempt: at thousands of
 * deliveries a second they cost the delivery thread as much as the HTTP exchange itself.
 */
class AttemptHandler implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  private decided = false;
  private received = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly settle: (attempt: Attempt) => void,
    private readonly timeoutMs: number,
  ) {
    this.timer = setTimeout(() => {
      this.decide({ responseStatus: null, error: noAnswer(timeoutMs) });
      this.controller?.abort(new Error("no answer in time"));
    }, timeoutMs);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.decided) controller.abort(new Error("no answer in time"));
  }

  onResponseStart(_controller: Dispatcher.DispatchController, status: number): void {
    if (status < 200) return;
    this.decide({ responseStatus: status, error: status < 300 ? null : `the receiver answered HTTP ${status}` });
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.received += chunk.length;
    if (this.received > answerCapBytes) controller.abort(new Error("the answer is longer than is read"));
  }

  onResponseEnd(): void {}

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.decide({ responseStatus: null, error: describe(error, this.timeoutMs) });
  }

  private decide(attempt: Attempt): void {
    if (this.decided) return;
    this.decided = true;
    clearTimeout(this.timer);
    this.settle(attempt);
  }
}

/**
 * POSTs one delivery. Redirects are not followed (a 3xx is a failed attempt: the receiver must give
 * its final URL); at most `answerCapBytes` of the answer are read; without an answer's status within
 * `timeoutMs` (WEBHOOK_ATTEMPT_TIMEOUT_MS) the attempt fails, and the answer's body then gets as long
 * between two of its pieces. Never throws: every outcome is an `Attempt`.
 */
export function post(
  target: { readonly url: string; readonly livemode: boolean },
  headers: Record<string, string>,
  body: string,
  timeoutMs: number,
): Promise<Attempt> {
  const destination = destinationOf(target.url, target.livemode);
  if ("refusal" in destination) return Promise.resolve({ responseStatus: null, error: destination.refusal });
  return new Promise((settle) => {
    const handler = new AttemptHandler(settle, timeoutMs);
    try {
      agentFor(target.livemode, timeoutMs).dispatch(
        {
          origin: destination.origin,
          path: destination.path,
          method: "POST",
          headers: { ...headers, "content-type": "application/json", "user-agent": "payment-service-webhooks/1" },
          body,
        },
        handler,
      );
    } catch (error) {
      handler.onResponseError(undefined as never, error as Error);
    }
  });
}
