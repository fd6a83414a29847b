import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { MethodNotAllowedError, unrecognizedUrl } from "../errors.js";
import { log } from "../log.js";
import { documentedCodeOf, toConnectError, writeError } from "./errors.js";
import type { Pages } from "./node-handler.js";
import { requestIdOf } from "./request-record.js";
import { parseRequestTarget } from "./request-target.js";

/** Where Prometheus scrapes: the text exposition of the instance's metrics. */
export const metricsPath = "/metrics";

/** The metrics text and its content type, as prom-client's registries give them. */
export interface MetricsText {
  readonly contentType: string;
  readonly text: string;
}

/** The operators' port, listening. */
export interface OpsListener {
  /** Base URL, e.g. http://127.0.0.1:9090. */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Opens the operators' port (OPS_PORT): plain HTTP/1.1 serving `/metrics` and the probes, and
 * nothing of the API. Metrics tell anyone who reads them the traffic of every merchant, so they
 * live on a port the load balancer does not expose rather than on the API port.
 */
export async function openOpsListener(port: number, metrics: () => Promise<MetricsText>, probes: readonly Pages[]): Promise<OpsListener> {
  const server = http.createServer((req, res) => {
    const requestId = requestIdOf(req.headers["x-request-id"]);
    res.setHeader("x-request-id", requestId);
    serveOps(req, res, metrics, probes).catch((reason: unknown) => {
      const error = toConnectError(reason, requestId);
      // A failure of ours (a cluster worker that did not answer the scrape) has no request line to carry its cause.
      if (documentedCodeOf(error) === "HE_00")
        log.error("operators' port request failed", { path: req.url?.split("?", 1)[0], cause: String(reason) });
      writeError(res, "rest", error);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "0.0.0.0", () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${bound}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function serveOps(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  metrics: () => Promise<MetricsText>,
  probes: readonly Pages[],
): Promise<void> {
  const method = req.method ?? "";
  const path = parseRequestTarget(req.url)?.path ?? "";
  if (path !== metricsPath) {
    const probe = probes.find((page) => page.prefix === path);
    if (probe === undefined) throw unrecognizedUrl(method, path);
    return probe.handler(req, res, path);
  }
  if (method !== "GET" && method !== "HEAD") throw new MethodNotAllowedError(method, path, ["GET", "HEAD"]);
  const { contentType, text } = await metrics();
  res.statusCode = 200;
  res.setHeader("content-type", contentType);
  res.setHeader("content-length", Buffer.byteLength(text));
  res.setHeader("cache-control", "no-store");
  if (method === "HEAD") res.end();
  else res.end(text);
}
