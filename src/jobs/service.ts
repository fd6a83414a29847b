import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { DataSource } from "typeorm";
import { Environment } from "../../gen/paymentservice/v1/common_pb.js";
import { JobStatus, JobStatusSchema, type JobSchema, type JobService } from "../../gen/paymentservice/v1/job_pb.js";
import { redactCardNumbers } from "../card-numbers.js";
import type { Clock } from "../clock.js";
import { fetchPage } from "../db/list-query.js";
import type { UnitOfWork } from "../db/unit-of-work.js";
import { sentWord } from "../enum-words.js";
import { notFound, unexpectedState } from "../errors.js";
import { envelope, pageOf } from "../validation/list.js";
import { JobRow } from "./job.entity.js";
import type { JobWaker } from "./runner.js";

/** What the jobs API needs: the database, time, the unit of work a retry commits in, and the runner to wake. */
export interface JobDependencies {
  readonly dataSource: DataSource;
  readonly clock: Clock;
  readonly units: UnitOfWork;
  readonly jobs: JobWaker;
}

const statuses = { pending: JobStatus.PENDING, dead: JobStatus.DEAD } as const;

/** A job id as the table makes them (bigserial): anything else names no job. */
const jobIdPattern = /^[1-9][0-9]{0,17}$/;

/**
 * The API view of a job: what an operator needs to decide on a retry, and nothing of the object's
 * own data. The error text is the handler's, with any card number masked, as in every message.
 */
export function toJob(row: JobRow): MessageInitShape<typeof JobSchema> {
  return {
    jobId: row.jobId,
    kind: row.kind,
    objectId: row.objectId,
    merchantId: row.merchantId,
    environment: row.livemode ? Environment.PRODUCTION : Environment.SANDBOX,
    status: statuses[row.status],
    attempts: row.attempts,
    lastError: row.lastError === null ? undefined : redactCardNumbers(row.lastError),
    nextRunAt: row.status === "pending" ? timestampFromDate(row.runAt) : undefined,
    created: timestampFromDate(row.created),
  };
}

/**
 * Operator API for the job queue (docs/operations.md "Dead jobs"): list the jobs of every merchant,
 * dead ones above all, and give a dead job its attempts again once its cause is fixed.
 */
export function jobService(deps: JobDependencies): ServiceImpl<typeof JobService> {
  const { dataSource, clock, units, jobs } = deps;

  return {
    async listJobs(req) {
      const page = pageOf(req);
      const query = dataSource.getRepository(JobRow).createQueryBuilder("j");
      const status = sentWord(JobStatusSchema, req.status);
      if (status !== undefined) query.andWhere("j.status = :status", { status });
      if (req.kind !== undefined) query.andWhere("j.kind = :kind", { kind: req.kind });
      const [rows, total] = await fetchPage(query, ["created", "jobId"], page);
      return envelope(rows.map(toJob), total, page);
    },

    /**
     * Makes a dead job pending again with no attempts, due now, and wakes this instance's runner. Only
     * a dead job: a pending one is already being tried, and restarting its count would hide it.
     */
    async retryJob(req, ctx) {
      if (!jobIdPattern.test(req.jobId)) throw notFound("Job", req.jobId);
      const retried = await units.commit(ctx, async (em) => {
        const now = clock.now();
        // A dead job has no lease (buryJob cleared it), so due now is all it takes for a runner to claim it.
        const { affected } = await em.update(JobRow, { jobId: req.jobId, status: "dead" }, { status: "pending", attempts: 0, runAt: now });
        const row = await em.findOneBy(JobRow, { jobId: req.jobId });
        if (row === null) throw notFound("Job", req.jobId);
        if (affected !== 1)
          throw unexpectedState({ object: "job", action: "retried", status: row.status, expected: ["dead"], code: "IR_16" });
        return row;
      });
      jobs.wake();
      return toJob(retried);
    },
  };
}
