import { describe, expect, it } from "vitest";
import { jobKinds } from "../src/jobs/kinds.js";
import { JobRunner } from "../src/jobs/runner.js";
import { visaCard as card } from "./support/cards.js";
import { rest, type JsonBody } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { onPostgres } from "./support/database.js";
import { newMerchant, type TestMerchant } from "./support/merchant.js";
import { createPayment } from "./support/payments.js";
import { instancePair, runningInstance } from "./support/running.js";
import { noPolling, type TestService } from "./support/service.js";
import { waitUntil } from "./support/wait.js";

/*
 * The job runner as a merchant sees it, through refunds: every due refund is sent once, whichever
 * instance's runner claims it and however many run side by side, and a refund whose job an instance
 * leased and never finished (it was killed mid-job) is sent once its lease has ended.
 */

/** Scheduled refunds wait this long by default (SCHEDULED_REFUND_DELAY_SECONDS). */
const scheduledDelayMs = 60_000;

/** How long the runner leases a refund job (src/refunds/jobs.ts). */
const refundLeaseMs = 60_000;

/** The killed instance's runner never polls: it leases only in the pass the test starts. */
const noPollingMs = Number(noPolling.JOB_POLL_MS);

async function paidPayment(service: TestService, merchant: TestMerchant, amount: number): Promise<string> {
  const payment = await createPayment(service.url, merchant, { amount, confirm: true, payment_method_data: { card } });
  expect(payment.status).toBe("succeeded");
  return payment.payment_id;
}

async function createRefund(service: TestService, merchant: TestMerchant, body: Record<string, unknown>): Promise<JsonBody> {
  const res = await rest(service.url, "POST", "/refunds", { apiKey: merchant.apiKey, body });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.status).toBe("pending");
  return res.body;
}

/** Every refund of a payment, through the list API (one page of up to 100). */
async function refundsOf(service: TestService, merchant: TestMerchant, paymentId: string): Promise<JsonBody[]> {
  const res = await rest(service.url, "POST", "/refunds/list", { apiKey: merchant.apiKey, body: { payment_id: paymentId, limit: 100 } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.has_more).toBe(false);
  return res.body.data;
}

/** The types of an object's events, as the merchant lists them, sorted. */
async function eventTypesOf(service: TestService, merchant: TestMerchant, objectId: string): Promise<string[]> {
  const res = await rest(service.url, "GET", `/events/list?object_id=${objectId}&limit=100`, { apiKey: merchant.apiKey });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data.map((event: JsonBody) => event.type).sort();
}

describe.skipIf(!onPostgres)(
  "two instances' runners on one PostgreSQL (PostgreSQL only: the embedded database belongs to one instance)",
  () => {
    const clock = new TestClock();
    // Two single instances whatever the topology: the test stops these two runners and counts what
    // each runs; runners of other instances behind a load balancer would run some of the same jobs.
    const { a, b, instance } = instancePair(noPolling, clock);

    it("settle 400 refunds, instant and scheduled, created on both: each is sent once and succeeds once", async () => {
      const merchant = await newMerchant(a.url);
      const paymentIds = await Promise.all(Array.from({ length: 40 }, (_, i) => paidPayment(instance(i), merchant, 1000)));
      // Ten refunds of 100 per payment, every other one scheduled, sent to both instances; a payment's
      // refunds one after another, as each locks the payment.
      const refunds = (
        await Promise.all(
          paymentIds.map(async (paymentId, p) => {
            const created: JsonBody[] = [];
            for (let i = 0; i < 10; i++) {
              const refundType = i % 2 === 0 ? "instant" : "scheduled";
              created.push(await createRefund(instance(p + i), merchant, { payment_id: paymentId, amount: 100, refund_type: refundType }));
            }
            return created;
          }),
        )
      ).flat();
      const scheduled = refunds.filter((r) => r.refund_type === "scheduled");
      expect(scheduled).toHaveLength(200);

      // Instant refunds are due at once: each instance's runner was woken by its creates, and both run
      // whatever is still due.
      await waitUntil(
        async () => {
          await Promise.all([a.jobs.runDue(), b.jobs.runDue()]);
          return (await Promise.all(paymentIds.map((id) => refundsOf(a, merchant, id)))).flat();
        },
        (listed) => listed.filter((r) => r.refund_type === "instant").every((r) => r.status === "succeeded"),
      );
      // No woken pass may still be about when the scheduled ones fall due, so the two passes below are
      // the only ones to run them.
      await Promise.all([a.jobs.stop(), b.jobs.stop()]);
      for (const listed of await Promise.all(paymentIds.map((id) => refundsOf(b, merchant, id)))) {
        expect(listed.filter((r) => r.refund_type === "scheduled").map((r) => r.status)).toEqual(Array(5).fill("pending"));
      }

      // All 200 scheduled refunds fall due together; both runners claim batches of them at once, and
      // between them run each job exactly once.
      clock.advance(scheduledDelayMs + 1000);
      const [ranOnA, ranOnB] = await Promise.all([a.jobs.runDue(), b.jobs.runDue()]);
      expect(ranOnA + ranOnB).toBe(200);
      expect(await Promise.all([a.jobs.runDue(), b.jobs.runDue()])).toEqual([0, 0]);

      const settled = (await Promise.all(paymentIds.map((id) => refundsOf(a, merchant, id)))).flat();
      expect(settled).toHaveLength(400);
      expect(settled.filter((r) => r.status !== "succeeded")).toEqual([]);
      const eventTypes = await Promise.all(refunds.map((r, i) => eventTypesOf(instance(i), merchant, r.refund_id)));
      for (const types of eventTypes) expect(types).toEqual(["refund.pending", "refund.succeeded"]);
      a.jobs.start();
      b.jobs.start();
    });
  },
);

describe("one instance's runner", () => {
  const clock = new TestClock();
  // One instance whatever the topology: what this instance's runDue() has done when it returns;
  // the other instances behind a load balancer would claim some of the same jobs meanwhile.
  const service = runningInstance(noPolling, clock);

  it("has sent every due refund when runDue() returns, those its woken pass claimed included", async () => {
    const merchant = await newMerchant(service.url);
    const paymentIds = await Promise.all(Array.from({ length: 10 }, () => paidPayment(service, merchant, 1000)));
    await Promise.all(
      paymentIds.map(async (paymentId) => {
        for (let i = 0; i < 10; i++)
          await createRefund(service, merchant, { payment_id: paymentId, amount: 100, refund_type: "scheduled" });
      }),
    );
    clock.advance(scheduledDelayMs + 1000);

    // An instant refund wakes the runner, whose pass claims it with the 100 scheduled ones now due,
    // so runDue() finds them leased: it must still wait until they have run.
    const instantFor = await paidPayment(service, merchant, 1000);
    await createRefund(service, merchant, { payment_id: instantFor, amount: 1000 });
    await service.jobs.runDue();

    const listed = (await Promise.all([...paymentIds, instantFor].map((id) => refundsOf(service, merchant, id)))).flat();
    expect(listed.map((r) => r.status)).toEqual(Array(101).fill("succeeded"));
  });

  it("leaves a job whose instance stopped mid-job alone while its lease holds, and runs it again, once, after the lease ends", async () => {
    const merchant = await newMerchant(service.url);
    const paymentId = await paidPayment(service, merchant, 500);
    const refund = await createRefund(service, merchant, { payment_id: paymentId, amount: 500, refund_type: "scheduled" });
    clock.advance(scheduledDelayMs + 1000);

    // Another instance leases the refund's job and never finishes it: the runner of an instance
    // killed mid-job, from which nothing more comes until its lease ends.
    let leased!: () => void;
    const jobLeased = new Promise<void>((resolve) => {
      leased = resolve;
    });
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const killed = new JobRunner(service.app.dataSource, clock, { pollMs: noPollingMs, maxAttempts: service.app.config.jobMaxAttempts });
    killed.register(
      new Map([
        [
          jobKinds.processRefund,
          {
            leaseMs: refundLeaseMs,
            async run() {
              leased();
              await released;
            },
          },
        ],
      ]),
    );
    const killedPass = killed.runDue();
    await jobLeased;

    // While the lease holds, no runner takes the job over, and the refund stays pending.
    expect(await service.jobs.runDue()).toBe(0);
    clock.advance(refundLeaseMs - 2000);
    expect(await service.jobs.runDue()).toBe(0);
    const waiting = await rest(service.url, "GET", `/refunds/${refund.refund_id}`, { apiKey: merchant.apiKey });
    expect(waiting.body.status).toBe("pending");

    // Once the lease has ended, the job is due again and runs.
    clock.advance(2000);
    expect(await service.jobs.runDue()).toBe(1);
    const sent = await rest(service.url, "GET", `/refunds/${refund.refund_id}`, { apiKey: merchant.apiKey });
    expect(sent.body).toMatchObject({ refund_id: refund.refund_id, status: "succeeded", amount: 500 });

    // What the lost lease's holder does when it wakes up changes nothing: the job ran once.
    release();
    expect(await killedPass).toBe(1);
    expect(await service.jobs.runDue()).toBe(0);
    expect(await eventTypesOf(service, merchant, refund.refund_id)).toEqual(["refund.pending", "refund.succeeded"]);
  });

  it("starts upkeep that comes due while a backlog keeps one pass claiming batches, not only when a pass begins", async () => {
    // A backlog of several full batches (64 jobs a claim), all due, which one pass works through.
    await service.app.dataSource.query(
      `INSERT INTO jobs (kind, merchant_id, livemode, object_id, run_at, created)
       SELECT $1, 'backlog', false, 'backlog-' || i, $2, $2 FROM generate_series(1, 200) AS i`,
      [jobKinds.processRefund, clock.now()],
    );
    const runner = new JobRunner(service.app.dataSource, clock, { pollMs: noPollingMs, maxAttempts: service.app.config.jobMaxAttempts });
    let upkeepRuns = 0;
    runner.every(10_000, async () => {
      upkeepRuns++;
    });
    // Each job takes a second of the test clock, so the pass lasts over three minutes of it.
    runner.register(
      new Map([
        [
          jobKinds.processRefund,
          {
            leaseMs: 3_600_000,
            async run() {
              clock.advance(1000);
            },
          },
        ],
      ]),
    );
    expect(await runner.runDue()).toBe(200);
    // Once when the pass began, and again before later batches: the reapers keep up under a backlog.
    expect(upkeepRuns).toBeGreaterThan(1);
  });
});
