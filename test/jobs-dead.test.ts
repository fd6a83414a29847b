import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { Environment } from "../gen/paymentservice/v1/common_pb.js";
import { JobService, JobStatus } from "../gen/paymentservice/v1/job_pb.js";
import type { JobKind } from "../src/jobs/kinds.js";
import { rest, rpcClient, type JsonBody } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { expectExactRestError, expectRestError, expectRpcError } from "./support/errors.js";
import { isoUtc } from "./support/formats.js";
import { newMerchant, type TestMerchant } from "./support/merchant.js";
import { runningInstance } from "./support/running.js";
import { noPolling } from "./support/service.js";

/*
 * Issue 19 item 9: a job that keeps failing gives up after JOB_MAX_ATTEMPTS attempts. It is dead:
 * never run again by itself, counted in the jobs_dead metric, listed by the operator's ListJobs with
 * what went wrong, and run again by RetryJob (REST and Connect), after which it succeeds. Merchant
 * keys reach none of it.
 */

const maxAttempts = 3;

/** Longer than any retry delay (at most an hour): each pass after it finds the failed job due again. */
const pastAnyRetryMs = 3_600_000 + 1000;

/** A kind of this test's own, whose handler fails while the thing it depends on is broken. */
const flakyKind = "test.flaky" as JobKind;

describe("dead jobs", () => {
  const clock = new TestClock();
  // One instance whatever the topology: its runner is the one given the test's handler, and its
  // registry the one scraped.
  const service = runningInstance({ ...noPolling, OPS_PORT: "0", JOB_MAX_ATTEMPTS: String(maxAttempts) }, clock);
  let broken = true;
  const ran: string[] = [];
  let registered = false;

  /** Schedules a job of the flaky kind on an object of `merchant`'s sandbox, due now; returns its object id. */
  async function flakyJob(merchant: TestMerchant, objectId: string): Promise<void> {
    if (!registered) {
      service.jobs.register(
        new Map([
          [
            flakyKind,
            async (_em, job) => {
              if (broken) throw new Error("processor unreachable");
              ran.push(job.objectId);
            },
          ],
        ]),
      );
      registered = true;
    }
    await service.app.dataSource.query(
      `INSERT INTO jobs (kind, merchant_id, livemode, object_id, run_at, attempts, created) VALUES ($1, $2, false, $3, $4, 0, $4)`,
      [flakyKind, merchant.merchantId, objectId, clock.now()],
    );
  }

  /** Runs the job's every allowed attempt, each once it is due again. */
  async function failEveryAttempt(): Promise<void> {
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      expect(await service.jobs.runDue(), `attempt ${attempt}`).toBe(1);
      clock.advance(pastAnyRetryMs);
    }
  }

  /** The operator's list of the flaky kind's jobs in `status`, over REST. */
  async function listed(status: string): Promise<JsonBody[]> {
    const res = await rest(service.url, "GET", `/jobs/list?status=${status}&kind=${flakyKind}&limit=100`, { admin: true });
    expect(res.status, res.text).toBe(200);
    return res.body.data;
  }

  /** The jobs_dead sample of the flaky kind on the operators' port (absent once the kind has no job left: 0). */
  async function deadInMetric(): Promise<number> {
    const text = await (await fetch(`${service.opsUrl}/metrics`)).text();
    const sample = new RegExp(`^paymentservice_jobs_dead\\{kind="${flakyKind}"\\} (\\S+)$`, "m").exec(text);
    return sample === null ? 0 : Number(sample[1]);
  }

  it("gives up after JOB_MAX_ATTEMPTS: dead, listed with its last error, counted, never run again; retried over REST it succeeds", async () => {
    const merchant = await newMerchant(service.url);
    await flakyJob(merchant, "obj_dead_rest");
    await failEveryAttempt();

    const [dead] = await listed("dead");
    expect(dead).toEqual({
      job_id: expect.stringMatching(/^[0-9]+$/),
      kind: flakyKind,
      object_id: "obj_dead_rest",
      merchant_id: merchant.merchantId,
      environment: "sandbox",
      status: "dead",
      attempts: maxAttempts,
      last_error: "Error: processor unreachable",
      next_run_at: null,
      created: expect.stringMatching(isoUtc),
    });
    expect(await listed("pending")).toEqual([]);
    expect(await deadInMetric()).toBe(1);
    // Dead is for good: however long it waits, no runner claims it again.
    clock.advance(pastAnyRetryMs);
    expect(await service.jobs.runDue()).toBe(0);
    expect((await listed("dead")).map((job) => job.attempts)).toEqual([maxAttempts]);

    // Its cause fixed, the operator retries it: pending, no attempts yet, due now.
    broken = false;
    const retried = await rest(service.url, "POST", `/jobs/${dead.job_id}/retry`, { admin: true });
    expect(retried.status, retried.text).toBe(200);
    expect(retried.body).toMatchObject({ job_id: dead.job_id, status: "pending", attempts: 0, next_run_at: clock.now().toISOString() });
    expect(await deadInMetric()).toBe(0);
    await service.jobs.runDue();
    expect(ran).toEqual(["obj_dead_rest"]);
    expect(await listed("pending")).toEqual([]);
    expect(await listed("dead")).toEqual([]);
  });

  it("is retried over Connect, and a job that is not dead is refused with IR_16 naming its status", async () => {
    broken = true;
    const merchant = await newMerchant(service.url);
    await flakyJob(merchant, "obj_dead_connect");
    const admin = rpcClient(JobService, service.url, "connect", { admin: true });

    // While it still has attempts left it is pending, and a retry is refused.
    expect(await service.jobs.runDue()).toBe(1);
    const [pending] = await listed("pending");
    expect(pending).toMatchObject({ status: "pending", attempts: 1, last_error: "Error: processor unreachable" });
    expect(pending.next_run_at).toBe(new Date(clock.now().getTime() + 10_000).toISOString());
    const refused = await rest(service.url, "POST", `/jobs/${pending.job_id}/retry`, { admin: true });
    expectExactRestError(refused, 400, "IR_16", "because its status is pending; expected dead");
    await expectRpcError(admin.retryJob({ jobId: pending.job_id }), Code.FailedPrecondition, "IR_16");

    clock.advance(pastAnyRetryMs);
    for (let attempt = 2; attempt <= maxAttempts; attempt++) {
      expect(await service.jobs.runDue()).toBe(1);
      clock.advance(pastAnyRetryMs);
    }
    const dead = await admin.listJobs({ status: JobStatus.DEAD, kind: flakyKind });
    expect(dead.data.map((job) => [job.objectId, job.environment, job.attempts, job.nextRunAt])).toEqual([
      ["obj_dead_connect", Environment.SANDBOX, maxAttempts, undefined],
    ]);
    expect(await deadInMetric()).toBe(1);

    broken = false;
    const retried = await admin.retryJob({ jobId: dead.data[0]!.jobId });
    expect([retried.status, retried.attempts]).toEqual([JobStatus.PENDING, 0]);
    await service.jobs.runDue();
    expect(ran).toContain("obj_dead_connect");
    expect((await admin.listJobs({ kind: flakyKind })).data).toEqual([]);
    expect(await deadInMetric()).toBe(0);
  });

  it("answers HE_02 for a job that does not exist, and IR_06 for a list limit out of range", async () => {
    for (const jobId of ["999999999999", "not-a-job"]) {
      const res = await rest(service.url, "POST", `/jobs/${jobId}/retry`, { admin: true });
      expectExactRestError(res, 404, "HE_02", `Job not found: ${jobId}`);
    }
    const tooMany = await rest(service.url, "GET", "/jobs/list?limit=101", { admin: true });
    expect(expectRestError(tooMany, 400, "IR_06")).toContain("limit");
  });

  it("refuses merchant keys: listing and retrying jobs is the operator's alone", async () => {
    const merchant = await newMerchant(service.url);
    expectRestError(await rest(service.url, "GET", "/jobs/list", { apiKey: merchant.apiKey }), 401, "IR_01");
    expectRestError(await rest(service.url, "POST", "/jobs/1/retry", { apiKey: merchant.apiKey }), 401, "IR_01");
    const asMerchant = rpcClient(JobService, service.url, "connect", { apiKey: merchant.apiKey });
    await expectRpcError(asMerchant.listJobs({}), Code.Unauthenticated, "IR_01");
    await expectRpcError(asMerchant.retryJob({ jobId: "1" }), Code.Unauthenticated, "IR_01");
  });
});
