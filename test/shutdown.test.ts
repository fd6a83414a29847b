import { describe, expect, it } from "vitest";
import type { JobKind } from "../src/jobs/kinds.js";
import { type LeasedJobHandler, JobRunner } from "../src/jobs/runner.js";
import { refundJobHandlers } from "../src/refunds/jobs.js";
import { visaCard as card } from "./support/cards.js";
import { rest } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { newMerchant } from "./support/merchant.js";
import { createPayment } from "./support/payments.js";
import { runningInstance, runningService } from "./support/running.js";
import { noPolling, startInstance } from "./support/service.js";
import { waitUntil } from "./support/wait.js";

/*
 * What an operator and a load balancer see of an instance's life: the probes, and a shutdown that
 * turns unready first, keeps serving while the balancer notices, and hands back the jobs it claimed
 * but had not begun (docs/operations.md).
 */

describe("the probes /livez and /readyz", () => {
  const service = runningService();

  it("answer without an API key: alive, and ready once the database answers with every migration applied", async () => {
    for (const path of ["/livez", "/readyz"]) {
      const res = await fetch(`${service.url}${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get("content-type")).toBe("application/json");
      expect(res.headers.get("cache-control")).toBe("no-store");
      expect(await res.json()).toEqual({ status: "ok" });
      const head = await fetch(`${service.url}${path}`, { method: "HEAD" });
      expect(head.status).toBe(200);
      expect(await head.text()).toBe("");
    }
  });

  it("take GET and HEAD only, and a path beside them is an unknown URL, in the documented error shape", async () => {
    const post = await rest(service.url, "POST", "/readyz", { body: {} });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
    expect(post.body.error.code).toBe("IR_03");
    const beside = await rest(service.url, "GET", "/readyz/now");
    expect(beside.status).toBe(404);
    expect(beside.body.error.code).toBe("IR_02");
  });
});

describe("a shutdown with a drain delay", () => {
  it("reports not ready at once, keeps serving calls until the delay ends, then refuses connections", async () => {
    // One instance whatever TEST_TOPOLOGY says: what that instance does while it drains.
    const service = await startInstance();
    const merchant = await newMerchant(service.url);
    const closed = service.close({ drainDelayMs: 1_500, graceMs: 5_000 });
    const ready = await fetch(`${service.url}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toEqual({ status: "draining" });
    expect((await fetch(`${service.url}/livez`)).status).toBe(200);
    const payment = await createPayment(service.url, merchant, { amount: 1000, confirm: true, payment_method_data: { card } });
    expect(payment.status).toBe("succeeded");
    await closed;
    await expect(fetch(`${service.url}/livez`)).rejects.toThrow();
  });
});

describe("a job runner that stops", () => {
  const clock = new TestClock();
  // One instance whatever TEST_TOPOLOGY says: its runner and a second one share its database directly.
  const service = runningInstance(noPolling, clock);

  it("finishes the jobs it has begun and gives back those it claimed but had not begun, due at once for another instance", async () => {
    const merchant = await newMerchant(service.url);
    const refundIds: string[] = [];
    for (let i = 0; i < 20; i++) {
      const payment = await createPayment(service.url, merchant, { amount: 1000, confirm: true, payment_method_data: { card } });
      const refund = await rest(service.url, "POST", "/refunds", {
        apiKey: merchant.apiKey,
        body: { payment_id: payment.payment_id, amount: 500, refund_type: "scheduled" },
      });
      expect(refund.status, JSON.stringify(refund.body)).toBe(200);
      refundIds.push(refund.body.refund_id);
    }
    clock.advance(61_000);

    // A second instance's runner, whose refund jobs wait at a gate once begun: it runs 16 at a time,
    // so of the 20 it claims, 4 have not begun when it is told to stop.
    const stopping = new JobRunner(service.app.dataSource, clock, {
      pollMs: Number(noPolling.JOB_POLL_MS),
      maxAttempts: service.app.config.jobMaxAttempts,
    });
    let begun = 0;
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const gated = new Map<JobKind, LeasedJobHandler>(
      [...refundJobHandlers(service.app)].map(([kind, handler]) => [
        kind,
        {
          leaseMs: handler.leaseMs,
          async run(job) {
            begun++;
            await gate;
            await handler.run(job);
          },
        },
      ]),
    );
    stopping.register(gated);
    const pass = stopping.runDue();
    await waitUntil(
      async () => {
        await new Promise((resolve) => setTimeout(resolve, 25));
        return begun;
      },
      (n) => n === 16,
      800,
    );
    const stopped = stopping.stop();
    open();
    await stopped;
    await pass;
    expect(begun).toBe(16);

    // The 4 given back are due now: this instance's runner sends them without waiting for a lease to end.
    expect(await service.jobs.runDue()).toBe(4);
    for (const refundId of refundIds) {
      const refund = await rest(service.url, "GET", `/refunds/${refundId}`, { apiKey: merchant.apiKey });
      expect(refund.body.status, refundId).toBe("succeeded");
    }
  });
});
