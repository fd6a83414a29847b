import { AggregatorRegistry, type Registry } from "prom-client";
import type { MetricsText } from "../transport/ops-listener.js";

/*
 * With WORKERS > 1 (node:cluster) the workers share the API port, so a scrape of a port they shared
 * would reach one worker at random. Instead the primary alone opens OPS_PORT and asks every worker
 * for its registry over the cluster's IPC channel (prom-client's AggregatorRegistry): counters and
 * histograms are summed, the database-wide gauges taken from the first worker.
 */

/** In a worker: answers the primary's requests with this worker's registry. */
export function reportToPrimary(registry: Registry): void {
  // Constructing one installs the worker's listener for the primary's requests.
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([registry]);
}

/** In the primary: the metrics of every worker, aggregated, for the operators' port. */
export function clusterMetrics(): () => Promise<MetricsText> {
  const aggregator = new AggregatorRegistry();
  return async () => ({ contentType: aggregator.contentType, text: await aggregator.clusterMetrics() });
}
