import { execFile } from "node:child_process";
import path from "node:path";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../gen/grpc/health/v1/health_pb.js";
import { runningService } from "./support/running.js";
import { onFileDatabase, onPostgres, rows } from "./support/database.js";
import { startInstance } from "./support/service.js";
import { waitUntil } from "./support/wait.js";

const service = runningService();

const bufBinary = path.resolve(import.meta.dirname, "../node_modules/.bin/buf");

/** A health client with no API key, as Kubernetes probes and grpc_health_probe call. */
function healthClient(baseUrl: string, protocol: "grpc" | "connect"): Client<typeof Health> {
  const transport = protocol === "grpc" ? createGrpcTransport({ baseUrl }) : createConnectTransport({ baseUrl, httpVersion: "1.1" });
  return createClient(Health, transport);
}

/** The statuses a Watch sends until it ends or `count` have come. */
async function firstStatuses(watch: AsyncIterable<{ status: ServingStatus }>, count: number): Promise<ServingStatus[]> {
  const statuses: ServingStatus[] = [];
  for await (const { status } of watch) {
    statuses.push(status);
    if (statuses.length === count) break;
  }
  return statuses;
}

describe("grpc.health.v1.Health", () => {
  it.each(["grpc", "connect"] as const)(
    "answers Check over %s without an API key: SERVING for the server and each service",
    async (protocol) => {
      const client = healthClient(service.url, protocol);
      for (const name of ["", "paymentservice.v1.PaymentService", "paymentservice.v1.HealthService", "grpc.health.v1.Health"]) {
        expect((await client.check({ service: name })).status, name).toBe(ServingStatus.SERVING);
      }
    },
  );

  it.each(["grpc", "connect"] as const)("answers Check of an unknown service over %s with NOT_FOUND", async (protocol) => {
    const failure = await healthClient(service.url, protocol)
      .check({ service: "no.such.Service" })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(failure).toBeInstanceOf(ConnectError);
    expect((failure as ConnectError).code).toBe(Code.NotFound);
  });

  it.each(["grpc", "connect"] as const)(
    "streams the current status first over %s, and SERVICE_UNKNOWN for an unknown service",
    async (protocol) => {
      const client = healthClient(service.url, protocol);
      const whole = new AbortController();
      expect(await firstStatuses(client.watch({ service: "" }, { signal: whole.signal }), 1)).toEqual([ServingStatus.SERVING]);
      whole.abort();
      const unknown = new AbortController();
      expect(await firstStatuses(client.watch({ service: "no.such.Service" }, { signal: unknown.signal }), 1)).toEqual([
        ServingStatus.SERVICE_UNKNOWN,
      ]);
      unknown.abort();
    },
  );

  it("lets buf curl call Check without an API key or a local schema", async () => {
    const { exitCode, stdout, stderr } = await new Promise<{ exitCode: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        bufBinary,
        ["curl", "--protocol", "grpc", "--http2-prior-knowledge", `${service.url}/grpc.health.v1.Health/Check`],
        { timeout: 20_000 },
        (error, stdout, stderr) => resolve({ exitCode: error === null ? 0 : Number(error.code ?? 1), stdout, stderr }),
      );
    });
    expect(exitCode, stderr).toBe(0);
    expect(JSON.parse(stdout)).toEqual({ status: "SERVING" });
  });

  it("turns NOT_SERVING once the instance begins to close: a Watch is told and ends, and a Check says so", async () => {
    // One instance whatever the topology: what an orchestrator's probe of this very instance sees
    // while it shuts down; a load balancer in front would be stopped first and end the Watch itself.
    const closing = await startInstance();
    const grpc = healthClient(closing.url, "grpc");
    const watched: ServingStatus[] = [];
    const watchEnded = (async () => {
      for await (const { status } of grpc.watch({ service: "paymentservice.v1.PaymentService" })) watched.push(status);
    })();
    await expect.poll(() => watched).toEqual([ServingStatus.SERVING]);

    // The drain delay keeps the instance serving while probes learn it is going (docs/operations.md).
    const closed = closing.close({ drainDelayMs: 3_000, graceMs: 5_000 });
    await watchEnded;
    expect(watched).toEqual([ServingStatus.SERVING, ServingStatus.NOT_SERVING]);
    expect((await healthClient(closing.url, "grpc").check({ service: "" })).status).toBe(ServingStatus.NOT_SERVING);
    expect((await healthClient(closing.url, "connect").check({ service: "paymentservice.v1.PaymentService" })).status).toBe(
      ServingStatus.NOT_SERVING,
    );

    await closed;
  });

  it.skipIf(!onPostgres)("stays SERVING while every pooled database connection is busy (PostgreSQL: the probe has its own)", async () => {
    // One instance whatever the topology: its own pool (two connections here) is what is kept busy.
    const busy = await startInstance({ DATABASE_POOL_SIZE: "2" });
    try {
      // Far longer than a probe waits for the database (800 ms): a probe queued in the pool would answer NOT_SERVING.
      let released = false;
      const held = Promise.all([1, 2].map(() => busy.app.dataSource.query("SELECT pg_sleep(5)"))).then(() => {
        released = true;
      });
      await onFileDatabase((db) =>
        waitUntil(
          () =>
            rows(
              db,
              "SELECT 1 FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(5)' AND state = 'active' AND datname = current_database()",
            ),
          (active) => active.length === 2,
        ),
      );
      expect((await healthClient(busy.url, "grpc").check({ service: "" })).status).toBe(ServingStatus.SERVING);
      expect(released, "the pool's connections were still busy when the probe answered").toBe(false);
      await held;
    } finally {
      await busy.close();
    }
  });
});
