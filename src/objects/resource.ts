import type { DescMessage, MessageInitShape } from "@bufbuild/protobuf";
import type { DataSource, EntityManager, EntityMetadata, EntityTarget } from "typeorm";
import type { Clock } from "../clock.js";
import { claimLost, notFound, type ApiError } from "../errors.js";
import { EventRow } from "../events/event.entity.js";
import { JobRow } from "../jobs/job.entity.js";
import { deliveriesSql, eventsReturning } from "../webhooks/schedule.js";
import { newEvent } from "../events/record.js";
import type { NewJob } from "../jobs/runner.js";
import type { StateMachine } from "../state-machine.js";
import { BatchesByResource } from "../db/batches.js";
import { addEndOfJobs, addFollowUps, jobRowOf } from "./follow-ups.js";
import { BatchedReads } from "../db/batched-reads.js";
import { lockRow, rowFromDatabase } from "../db/lock.js";
import { preparedIn } from "../db/prepared.js";
import { objectKey, type Scope } from "../db/scope.js";
import { arraysOf, insertShapeOf, qualifiedNames, Statement, unnestOf } from "../db/statement.js";

/** A stored object with a status, owned by one merchant in one environment. */
export interface StatusRow {
  merchantId: string;
  livemode: boolean;
  /** The business profile whose webhook_url receives the object's events. */
  profileId: string;
  status: string;
}

/**
 * How a resource with a status is stored and reported (payments, refunds, disputes): what the shared
 * locking read and one-statement writes need to know about it.
 */
export interface Resource<Row extends StatusRow, Desc extends DescMessage> {
  /** "payment": the event type prefix (payment.succeeded) and the job kind prefix (payment.…). */
  readonly name: string;
  /** "Payment", for not-found messages. */
  readonly label: string;
  readonly entity: EntityTarget<Row>;
  /** The property holding the object's id, e.g. paymentId. */
  readonly idProperty: keyof Row & string;
  readonly schema: Desc;
  view(row: Row): MessageInitShape<Desc>;
  /** Its statuses: reaching a final one deletes the object's pending jobs. */
  readonly states: StateMachine<Row["status"], string>;
  /**
   * An SQL condition on a new object's row (the table `alias`) without which it is not written, e.g.
   * that the profile it names belongs to its merchant.
   */
  guard?(alias: string): string;
  /** The error answering a new object the guard stopped, naming the field (looked up in `em`). */
  refusal?(em: EntityManager, row: Row): Promise<ApiError>;
  /**
   * What no two new objects in one batched statement may share, when the guard reads a row that
   * writing the object changes (a refund's payment); by default the object's own key.
   */
  batchKey?(row: Row): string;
}

/** The object's own id, e.g. its payment_id. */
export function idOf<Row extends StatusRow>(resource: Resource<Row, DescMessage>, row: Row): string {
  return row[resource.idProperty] as string;
}

/**
 * Loads an object of the caller's merchant and environment and locks its row until the transaction
 * ends, so the status checks and changes of one operation never interleave with another's.
 */
export async function lockObject<Row extends StatusRow, Desc extends DescMessage>(
  em: EntityManager,
  resource: Resource<Row, Desc>,
  scope: Scope,
  id: string,
): Promise<Row> {
  const key = { merchantId: scope.merchantId, livemode: scope.livemode, [resource.idProperty]: id } as Partial<Row>;
  const row = await lockRow(em, resource.entity, key);
  if (row === null) throw notFound(resource.label, id);
  return row;
}

/** Each resource's reads by key and the entity they map to, made on first use. */
const readsByResource = new WeakMap<object, { reads: BatchedReads<Record<string, unknown>>; metadata: EntityMetadata }>();

/**
 * Loads an object of the caller's merchant and environment without locking it (a retrieve, on the
 * hot path of every client that polls), batched with other calls' reads of the same resource. The
 * columns are named, not `*`, so that a column a later migration adds does not change the result of
 * a statement an older instance has prepared.
 */
export async function findObject<Row extends StatusRow, Desc extends DescMessage>(
  em: EntityManager,
  resource: Resource<Row, Desc>,
  scope: Scope,
  id: string,
): Promise<Row> {
  let byKey = readsByResource.get(resource);
  if (byKey === undefined) {
    const metadata = em.connection.getMetadata(resource.entity);
    const idColumn = metadata.findColumnWithPropertyName(resource.idProperty)!.databaseName;
    const columns = metadata.columns.map((column) => `t."${column.databaseName}"`).join(", ");
    byKey = { reads: new BatchedReads(metadata.tableName, idColumn, columns), metadata };
    readsByResource.set(resource, byKey);
  }
  const raw = await byKey.reads.read(em, scope, id);
  if (raw === undefined) throw notFound(resource.label, id);
  return rowFromDatabase(byKey.metadata, raw);
}

/** The `<resource>.<status>` event of the status the object is in now. */
export function eventOf<Row extends StatusRow, Desc extends DescMessage>(resource: Resource<Row, Desc>, row: Row, clock: Clock): EventRow {
  return newEvent(
    {
      merchantId: row.merchantId,
      livemode: row.livemode,
      resource: resource.name,
      objectId: idOf(resource, row),
      profileId: row.profileId,
      status: row.status,
      schema: resource.schema,
      view: resource.view(row),
    },
    clock,
  );
}

/**
 * Writes a change to a locked object in one statement with what must commit with it: the event of
 * the status it entered (if it changed), the jobs the new status needs, and the end of pending jobs
 * once its status is final.
 */
export async function writeObjectChange<Row extends StatusRow, Desc extends DescMessage>(
  em: EntityManager,
  clock: Clock,
  resource: Resource<Row, Desc>,
  row: Row,
  previousStatus: Row["status"],
  jobs: readonly NewJob[] = [],
): Promise<void> {
  await runChange(
    em,
    clock,
    resource,
    row,
    previousStatus,
    jobs,
    new Statement().update("object", em.connection.getMetadata(resource.entity), row),
  );
}

/** The outcome of an operation on an object it claimed, with what must commit with it. */
interface ClaimedChange<Row> {
  readonly row: Row;
  /** The claim the outcome is written under. */
  readonly token: string;
  /** The event of the status the object entered, if it changed. */
  readonly event: EventRow | undefined;
  /** The jobs its new status needs (only with a new status). */
  readonly jobs: readonly NewJob[];
  /** Whether the status is final, which ends the object's pending jobs. */
  readonly final: boolean;
}

/** Each resource's claimed-change statement text, built once. */
const claimedChangeTexts = new WeakMap<object, string>();

/**
 * The statement that writes the outcomes of any number of operations on objects of one resource, each
 * releasing its claim, with their events, webhook deliveries and jobs, and the end of the pending jobs
 * of each object whose status is final. An outcome is written only while its claim still holds the
 * object. It answers the positions (from 1) of the outcomes it wrote. Its rows arrive as one array per
 * column, so its text is the same for one outcome or two hundred and is prepared once per connection.
 */
function claimedChangeText(connection: DataSource, resource: Resource<StatusRow, DescMessage>): string {
  let text = claimedChangeTexts.get(resource);
  if (text !== undefined) return text;
  const object = connection.getMetadata(resource.entity);
  const event = connection.getMetadata(EventRow);
  const job = connection.getMetadata(JobRow);
  const { columns } = insertShapeOf(object);
  const set = columns.filter((c) => !c.isPrimary).map((c) => `"${c.databaseName}" = input."${c.databaseName}"`);
  const key = object.primaryColumns.map((c) => `t."${c.databaseName}" = input."${c.databaseName}"`);
  const objectId = `input."${object.findColumnWithPropertyName(resource.idProperty)!.databaseName}"`;
  const eventParam = 1 + columns.length + 1;
  const jobParam = eventParam + insertShapeOf(event).columns.length + 1;
  const finalParam = jobParam + insertShapeOf(job).columns.length + 1;
  text =
    `WITH input AS (SELECT * FROM ${unnestOf(object, "input", 1, "ordinality", [{ name: "held_token", type: "varchar" }])}),\n` +
    `object AS (UPDATE "${object.tableName}" AS t SET ${set.join(", ")} FROM input WHERE ${key.join(" AND ")} AND t.claim_token = input.held_token RETURNING input.position),\n` +
    `event AS (INSERT INTO "${event.tableName}" (${insertShapeOf(event).names}) SELECT ${qualifiedNames(event, "e")} FROM ${unnestOf(event, "e", eventParam, "array")} JOIN object USING (position) RETURNING ${eventsReturning}),\n` +
    `delivery AS (${deliveriesSql("event")}),\n` +
    `job AS (INSERT INTO "${job.tableName}" (${insertShapeOf(job).names}) SELECT ${qualifiedNames(job, "j")} FROM ${unnestOf(job, "j", jobParam, "array")} JOIN object USING (position)),\n` +
    // A job a runner has claimed is skipped, not waited for (addEndOfJobs says why).
    `ended_jobs AS (DELETE FROM jobs WHERE job_id IN (SELECT jobs.job_id FROM jobs JOIN input ON jobs.merchant_id = input.merchant_id ` +
    `AND jobs.livemode = input.livemode AND jobs.object_id = ${objectId} JOIN object ON object.position = input.position ` +
    `WHERE input.position = ANY ($${finalParam}::bigint[]) AND starts_with(jobs.kind, $${finalParam + 1}::text) FOR UPDATE OF jobs SKIP LOCKED))\n` +
    "SELECT position FROM object";
  claimedChangeTexts.set(resource, text);
  return text;
}

/** Writes claimed changes of one resource in one statement on `em`: for each, in order, whether it was written. */
async function writeClaimedChanges<Row extends StatusRow>(
  em: EntityManager,
  clock: Clock,
  resource: Resource<Row, DescMessage>,
  changes: readonly ClaimedChange<Row>[],
): Promise<boolean[]> {
  const positions = (has: (change: ClaimedChange<Row>) => number) => changes.flatMap((change, i) => Array(has(change)).fill(i + 1));
  const withEvent = changes.filter((change) => change.event !== undefined);
  const params = [
    ...arraysOf(
      em.connection.getMetadata(resource.entity),
      changes.map((change) => change.row),
    ),
    changes.map((change) => change.token),
    ...arraysOf(
      em.connection.getMetadata(EventRow),
      withEvent.map((change) => change.event!),
    ),
    positions((change) => (change.event === undefined ? 0 : 1)),
    ...arraysOf(
      em.connection.getMetadata(JobRow),
      changes.flatMap((change) => change.jobs.map((job) => jobRowOf(job, clock))),
    ),
    positions((change) => change.jobs.length),
    positions((change) => (change.final ? 1 : 0)),
    `${resource.name}.`,
  ];
  const text = claimedChangeText(em.connection, resource as unknown as Resource<StatusRow, DescMessage>);
  const written = new Set((await preparedIn<{ position: string }>(em, text, params)).map((row) => Number(row.position)));
  return changes.map((_, i) => written.has(i + 1));
}

/** The claimed changes of a resource that operations write at about the same time, sent together (src/db/batches.ts). */
const claimedChangeBatches = new BatchesByResource<ClaimedChange<StatusRow>, boolean>();

/**
 * Writes the outcome of an operation that claimed the object (src/db/claims.ts) as writeObjectChange
 * does, releasing the claim in the same statement: in `em`'s transaction when it has one, else in a
 * batch with the outcomes other operations write at the same time. Nothing is written when the claim
 * is no longer this operation's: its lease ran out mid-call and another operation took the object, so
 * this outcome must not overwrite what that one did: the request is answered IK_01. "ended" when the
 * status is final, so the same statement ended the object's pending jobs (a job writing its own
 * object's outcome need not delete itself again).
 */
export async function writeClaimedChange<
  Row extends StatusRow & { claimToken: string | null; claimedUntil: Date | null },
  Desc extends DescMessage,
>(
  em: EntityManager,
  clock: Clock,
  resource: Resource<Row, Desc>,
  claimed: { readonly row: Row; readonly token: string },
  previousStatus: Row["status"],
  jobs: readonly NewJob[] = [],
): Promise<"ended" | undefined> {
  const { row, token } = claimed;
  row.claimToken = null;
  row.claimedUntil = null;
  const changed = row.status !== previousStatus;
  const change: ClaimedChange<Row> = {
    row,
    token,
    event: changed ? eventOf(resource, row, clock) : undefined,
    jobs: changed ? jobs : [],
    final: resource.states.isFinal(row.status),
  };
  const generic = resource as unknown as Resource<StatusRow, DescMessage>;
  const dataSource = em.connection;
  const written =
    em.queryRunner === undefined
      ? await claimedChangeBatches
          .of(dataSource, resource, (batch) => writeClaimedChanges(dataSource.manager, clock, generic, batch))
          .add(change, objectKey(row, idOf(resource, row)))
      : (await writeClaimedChanges(em, clock, generic, [change]))[0]!;
  if (!written) throw claimLost(resource.name, idOf(resource, row));
  return change.final ? "ended" : undefined;
}

/** Adds the follow-ups to a change's statement and runs it; how many object rows it wrote. */
async function runChange<Row extends StatusRow, Desc extends DescMessage>(
  em: EntityManager,
  clock: Clock,
  resource: Resource<Row, Desc>,
  row: Row,
  previousStatus: Row["status"],
  jobs: readonly NewJob[],
  statement: Statement,
): Promise<number> {
  if (row.status !== previousStatus) addFollowUps(statement, em, clock, { event: eventOf(resource, row, clock), jobs }, "object");
  if (resource.states.isFinal(row.status)) addEndOfJobs(statement, { ...row, objectId: idOf(resource, row) }, `${resource.name}.`);
  const [result] = await preparedIn<{ n: number }>(em, statement.sql("object"), statement.params);
  return result!.n;
}
