import { describe, expect, it } from "vitest";
import { HealthService } from "../gen/paymentservice/v1/health_pb.js";
import { visaCard as card } from "./support/cards.js";
import { rest, rpcClient } from "./support/clients.js";
import { newMerchant } from "./support/merchant.js";
import { createPayment } from "./support/payments.js";
import { runningInstance } from "./support/running.js";
import { noPolling, type TestService } from "./support/service.js";

/*
 * Issue 19 item 5: Prometheus metrics on the operators' port (OPS_PORT), as an operator's scraper
 * reads them. A service started with OPS_PORT=0 is scraped, called (a success, a refused call, a
 * job) and scraped again: the counters of those calls moved, with the labels they should carry,
 * and the API port does not serve the metrics.
 */

/** Every metric an operator's dashboards rely on: ours, and a few of prom-client's default process metrics. */
const expectedNames = [
  "paymentservice_requests_total",
  "paymentservice_request_duration_seconds",
  "paymentservice_db_pool_connections",
  "paymentservice_db_pool_idle_connections",
  "paymentservice_db_pool_waiting_requests",
  "paymentservice_db_primary",
  "paymentservice_db_primary_changes_total",
  "paymentservice_jobs_queued",
  "paymentservice_jobs_due",
  "paymentservice_jobs_lag_seconds",
  "paymentservice_jobs_dead",
  "paymentservice_job_failures_total",
  "paymentservice_webhook_deliveries_pending",
  "paymentservice_webhook_delivery_lag_seconds",
  "paymentservice_webhook_deliveries_failed",
  "paymentservice_idempotency_keys",
  "paymentservice_rate_limit_fallbacks_total",
  "paymentservice_scrape_query_up",
  "process_cpu_seconds_total",
  "process_resident_memory_bytes",
  "nodejs_eventloop_lag_seconds",
  "nodejs_heap_size_used_bytes",
];

const createPaymentProcedure = "/paymentservice.v1.PaymentService/CreatePayment";

/** One scrape: the exposition text, and the value of a sample by name and labels (absent: undefined). */
interface Scrape {
  readonly text: string;
  value(name: string, labels?: Record<string, string>): number | undefined;
}

async function scrape(service: TestService): Promise<Scrape> {
  const res = await fetch(`${service.opsUrl}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
  const text = await res.text();
  const samples = text
    .split("\n")
    .filter((line) => line !== "" && !line.startsWith("#"))
    .map((line) => {
      const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (match === null) throw new Error(`not a sample line: ${line}`);
      const labels = Object.fromEntries([...(match[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1]!, m[2]!]));
      return { name: match[1]!, labels, value: Number(match[3]) };
    });
  return {
    text,
    value(name, labels = {}) {
      const sample = samples.find(
        (s) =>
          s.name === name &&
          Object.keys(s.labels).length === Object.keys(labels).length &&
          Object.entries(labels).every(([key, value]) => s.labels[key] === value),
      );
      return sample?.value;
    },
  };
}

/** How much a sample grew between two scrapes (absent counts as 0, as a counter not yet touched). */
function growth(before: Scrape, after: Scrape, name: string, labels: Record<string, string>): number {
  return (after.value(name, labels) ?? 0) - (before.value(name, labels) ?? 0);
}

describe("metrics on the operators' port", () => {
  // One instance whatever TEST_TOPOLOGY says: the counters are that instance's own registry.
  const service = runningInstance({ ...noPolling, OPS_PORT: "0" });

  it("serves every metric name, the probes beside them, and nothing of it on the API port", async () => {
    expect(service.opsUrl).toBeDefined();
    expect(new URL(service.opsUrl!).port).not.toBe(new URL(service.url).port);
    const first = await scrape(service);
    for (const name of expectedNames) expect(first.text, name).toMatch(new RegExp(`^# TYPE ${name} `, "m"));
    expect(first.value("paymentservice_db_pool_connections")).toBeGreaterThan(0);
    // One host: the one the pool has always used, and no change.
    expect(first.text).toMatch(/^paymentservice_db_primary\{host="[^"]+:[0-9]+"\} 1$/m);
    expect(first.value("paymentservice_db_primary_changes_total")).toBe(0);
    for (const query of ["jobs", "webhook_pending", "webhook_failed", "idempotency_keys"]) {
      expect(first.value("paymentservice_scrape_query_up", { query }), query).toBe(1);
    }
    expect(first.value("paymentservice_webhook_deliveries_pending")).toBeGreaterThanOrEqual(0);
    expect(first.value("paymentservice_idempotency_keys")).toBeGreaterThanOrEqual(0);

    for (const path of ["/livez", "/readyz"]) {
      const probe = await fetch(service.opsUrl + path);
      expect(probe.status, path).toBe(200);
      expect(await probe.json()).toEqual({ status: "ok" });
    }
    expect((await fetch(`${service.opsUrl}/payments`)).status).toBe(404);

    const onApiPort = await rest(service.url, "GET", "/metrics");
    expect(onApiPort.status).toBe(404);
    expect(onApiPort.body.error.code).toBe("IR_02");
    expect(onApiPort.text).not.toContain("paymentservice_requests_total");
  });

  it("counts calls by procedure, protocol and code, with their latency", async () => {
    const merchant = await newMerchant(service.url);
    const before = await scrape(service);

    await createPayment(service.url, merchant, { confirm: true, payment_method_data: { card } });
    const refused = await rest(service.url, "POST", "/payments", {
      apiKey: merchant.apiKey,
      body: { currency: "USD", profile_id: merchant.profileId },
    });
    expect(refused.body.error.code).toBe("IR_04");
    await rpcClient(HealthService, service.url, "connect", { apiKey: merchant.apiKey }).check({});
    // Random paths all share one label value, so a scan cannot multiply the series.
    for (const path of ["/no/such/path", "/wp-login.php"]) await fetch(service.url + path);
    const unknownRpc = { method: "POST", headers: { "content-type": "application/json" }, body: "{}" };
    expect((await fetch(`${service.url}/paymentservice.v1.Nothing/Here`, unknownRpc)).status).toBe(404);

    const after = await scrape(service);
    const requests = "paymentservice_requests_total";
    expect(growth(before, after, requests, { procedure: createPaymentProcedure, protocol: "rest", code: "OK" })).toBe(1);
    expect(growth(before, after, requests, { procedure: createPaymentProcedure, protocol: "rest", code: "IR_04" })).toBe(1);
    expect(growth(before, after, requests, { procedure: "/paymentservice.v1.HealthService/Check", protocol: "connect", code: "OK" })).toBe(
      1,
    );
    expect(growth(before, after, requests, { procedure: "unrouted", protocol: "rest", code: "IR_02" })).toBe(2);
    expect(growth(before, after, requests, { procedure: "unrouted", protocol: "connect", code: "IR_02" })).toBe(1);
    expect(after.text).not.toContain("wp-login");
    const latencyCount = "paymentservice_request_duration_seconds_count";
    expect(growth(before, after, latencyCount, { procedure: createPaymentProcedure, protocol: "rest" })).toBe(2);
    const slowest = after.value("paymentservice_request_duration_seconds_bucket", {
      procedure: createPaymentProcedure,
      protocol: "rest",
      le: "+Inf",
    });
    expect(slowest).toBe(after.value(latencyCount, { procedure: createPaymentProcedure, protocol: "rest" }));
  });

  it("reports the job queue by kind, its lag, and failed attempts by kind", async () => {
    const merchant = await newMerchant(service.url);
    const before = await scrape(service);
    // A manual-capture authorization schedules its expiry seven days ahead: queued, not due.
    const authorized = await createPayment(service.url, merchant, {
      capture_method: "manual",
      confirm: true,
      payment_method_data: { card },
    });
    expect(authorized.status).toBe("requires_capture");
    const expiry = { kind: "payment.expire_authorization" };
    const queued = await scrape(service);
    expect(growth(before, queued, "paymentservice_jobs_queued", expiry)).toBe(1);
    expect(growth(before, queued, "paymentservice_jobs_due", expiry)).toBe(0);

    // A job of a kind this release has no handler for, due a minute ago: it waits, then fails when run.
    const orphan = { kind: "retired.kind" };
    const dueAt = new Date(service.app.clock.now().getTime() - 60_000);
    await service.app.dataSource.query(
      `INSERT INTO jobs (kind, merchant_id, livemode, object_id, run_at, attempts, created) VALUES ($1, $2, false, 'obj_metrics', $3, 0, $3)`,
      [orphan.kind, merchant.merchantId, dueAt],
    );
    const waiting = await scrape(service);
    expect(waiting.value("paymentservice_jobs_due", orphan)).toBe(1);
    expect(waiting.value("paymentservice_jobs_lag_seconds", orphan)).toBeGreaterThanOrEqual(60);

    await service.jobs.runDue();
    const failed = await scrape(service);
    expect(growth(waiting, failed, "paymentservice_job_failures_total", orphan)).toBe(1);
    // Retried later: still queued, no longer due, so no lag.
    expect(failed.value("paymentservice_jobs_queued", orphan)).toBe(1);
    expect(failed.value("paymentservice_jobs_due", orphan)).toBe(0);
    expect(failed.value("paymentservice_jobs_lag_seconds", orphan)).toBe(0);
    expect(failed.value("paymentservice_jobs_dead", orphan)).toBe(0);

    // Its last allowed attempt failed (as if it were the JOB_MAX_ATTEMPTS-th): dead, out of the queue.
    await service.app.dataSource.query(`UPDATE jobs SET status = 'dead' WHERE kind = $1`, [orphan.kind]);
    const dead = await scrape(service);
    expect(dead.value("paymentservice_jobs_dead", orphan)).toBe(1);
    expect(dead.value("paymentservice_jobs_queued", orphan)).toBe(0);
    expect(dead.value("paymentservice_jobs_dead", expiry)).toBe(0);
  });

  describe("an instance whose Redis does not answer", () => {
    // Nothing listens on port 1: every rate-limit check falls back to this instance's own count.
    const cutOff = runningInstance({ OPS_PORT: "0", REDIS_URL: "redis://127.0.0.1:1" });

    it("counts its rate-limit fallbacks in its own registry, not in another instance's", async () => {
      const merchant = await newMerchant(cutOff.url);
      const before = await scrape(cutOff);
      for (let i = 0; i < 3; i++) {
        const res = await rest(cutOff.url, "GET", "/health", { apiKey: merchant.apiKey });
        expect(res.status).toBe(200);
      }
      const after = await scrape(cutOff);
      expect(growth(before, after, "paymentservice_rate_limit_fallbacks_total", {})).toBe(3);
      expect((await scrape(service)).value("paymentservice_rate_limit_fallbacks_total") ?? 0).toBe(0);
    });
  });
});
