import { Agent, request } from "undici";
import { isIP } from "node:net";
import { checkedLookup, hostOf, refusalOf } from "./target.js";

/** What one POST to a receiver came to: the HTTP status it answered, or why it got none. */
export interface Attempt {
  readonly responseStatus: number | null;
  /** Why the attempt failed, in words; null when the receiver answered 2xx. */
  readonly error: string | null;
}

/** How long an attempt may take, connection to the end of the answer (issue: "say 10 s"). */
export const attemptTimeoutMs = 10_000;
/** How much of an answer's body is read: receivers answer a few bytes; more is cut off, never buffered. */
const answerCapBytes = 16 * 1024;

/**
 * Connection pools, one per environment: a connection opened under the sandbox's rules
 * (a private address) must never be reused for a production delivery to the same host and port.
 */
const agents = new Map<boolean, Agent>();

function agentFor(livemode: boolean): Agent {
  let agent = agents.get(livemode);
  if (agent === undefined) {
    agent = new Agent({ connect: { lookup: checkedLookup(livemode) } });
    agents.set(livemode, agent);
  }
  return agent;
}

/** A refusal before any connection: production needs https, and an address literal is checked as one. */
function refusalBeforeConnecting(url: URL, livemode: boolean): string | undefined {
  if (livemode && url.protocol !== "https:") return "production events go to https URLs only";
  const host = hostOf(url);
  return isIP(host) === 0 ? undefined : refusalOf(host, livemode);
}

/** Words for a failure a receiver's user can act on. */
function describe(error: unknown, timedOut: boolean): string {
  if (timedOut) return `no answer within ${attemptTimeoutMs / 1000} s`;
  const code = (error as { code?: string }).code;
  if (code === "ECONNREFUSED") return "connection refused";
  if (code === "ENOTFOUND" || code === "EAI_AGAIN") return "host not found";
  if (code === "ECONNRESET") return "connection reset";
  return error instanceof Error ? error.message : String(error);
}

/**
 * POSTs one delivery. Redirects are not followed (a 3xx is a failed attempt: the receiver must give
 * its final URL); at most `answerCapBytes` of the answer are read; the whole attempt ends after
 * `attemptTimeoutMs`. Never throws: every outcome is an `Attempt`.
 */
export async function post(
  target: { readonly url: string; readonly livemode: boolean },
  headers: Record<string, string>,
  body: string,
): Promise<Attempt> {
  let url: URL;
  try {
    url = new URL(target.url);
  } catch {
    return { responseStatus: null, error: "webhook_url is not a valid URL" };
  }
  const refusal = refusalBeforeConnecting(url, target.livemode);
  if (refusal !== undefined) return { responseStatus: null, error: refusal };
  const signal = AbortSignal.timeout(attemptTimeoutMs);
  try {
    const answer = await request(url, {
      method: "POST",
      dispatcher: agentFor(target.livemode),
      signal,
      headers: { ...headers, "content-type": "application/json", "user-agent": "payment-service-webhooks/1" },
      body,
    });
    const status = answer.statusCode;
    await answer.body.dump({ limit: answerCapBytes }).catch(() => undefined);
    return { responseStatus: status, error: status >= 200 && status < 300 ? null : `the receiver answered HTTP ${status}` };
  } catch (error) {
    return { responseStatus: null, error: describe(error, signal.aborted) };
  }
}
