import { MethodNotAllowedError, unrecognizedUrl } from "../errors.js";
import type { Pages } from "../transport/node-handler.js";
import type { Readiness } from "./readiness.js";

/** Answered while the process runs its event loop: an orchestrator restarts an instance that stops answering it. */
export const livenessPath = "/livez";

/**
 * Answered 200 only while the instance can serve calls (Readiness): load balancers and
 * orchestrators stop routing to it otherwise, and from the first moment of a shutdown.
 */
export const readinessPath = "/readyz";

/**
 * The HTTP probes (docs/operations.md), without an API key like the gRPC health service, on the main
 * port so any load balancer can check what it routes to. They answer a small JSON body with the
 * state, 200 or 503, and never touch the database more than Readiness does (one query a second).
 * Without `readiness` (the primary of a cluster, which serves no calls itself) only /livez is served.
 */
export function createProbePages(readiness: Readiness | undefined): Pages[] {
  const answer = (path: string) => async (req: Parameters<Pages["handler"]>[0], res: Parameters<Pages["handler"]>[1], at: string) => {
    const method = req.method ?? "";
    if (at !== path) throw unrecognizedUrl(method, at);
    if (method !== "GET" && method !== "HEAD") throw new MethodNotAllowedError(method, at, ["GET", "HEAD"]);
    const up = path === livenessPath || (await readiness!.isReady());
    const body = JSON.stringify({ status: up ? "ok" : readiness!.isClosing ? "draining" : "unavailable" });
    res.statusCode = up ? 200 : 503;
    res.setHeader("content-type", "application/json");
    res.setHeader("content-length", Buffer.byteLength(body));
    if (method === "HEAD") res.end();
    else res.end(body);
  };
  const paths = readiness === undefined ? [livenessPath] : [livenessPath, readinessPath];
  return paths.map((path) => ({ prefix: path, handler: answer(path) }));
}
