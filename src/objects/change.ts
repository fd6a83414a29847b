import type { DescMessage } from "@bufbuild/protobuf";
import type { DataSource, EntityManager } from "typeorm";
import type { Clock } from "../clock.js";
import { EventRow } from "../events/event.entity.js";
import { completedKeysSql, keyAnswerArrays, keyAnswerParamCount, keyAnswersSql } from "../idempotency/store.js";
import { JobRow } from "../jobs/job.entity.js";
import { entryOf, ledgerArrays, ledgerSql, type LedgerEntry } from "../ledger/entries.js";
import type { NewJob } from "../jobs/runner.js";
import type { HandedOver } from "../webhooks/delivery-thread.js";
import { deliveriesSql, eventsReturning, handedOver, handedOverSql } from "../webhooks/schedule.js";
import { preparedIn } from "../db/prepared.js";
import { arraysOf, insertShapeOf, qualifiedNames, unnestOf } from "../db/statement.js";
import type { KeyAnswer } from "../db/unit-of-work.js";
import { eventOf, type Resource, type StatusRow } from "./resource.js";

/*
 * Every change to an object with a status — a new one, one whose row the caller's transaction
 * locked, one an operation claimed — is one value, `ObjectChange`, and reaches PostgreSQL through one
 * compiler: the statement below, whose object part depends on how the object is held and whose tail
 * (its event, the event's webhook delivery, its jobs, the end of its pending jobs once final, the
 * money it moves in the ledger, its call's idempotency key answered) is the same for all. The same
 * text writes one change or two hundred, in a transaction or in a batch of its own (objects/writer.ts
 * says which).
 */

/** How the object a change writes is held: not written yet, locked by the caller's transaction, or claimed by an operation. */
export type Holding = "new" | "locked" | "claimed";

/** One object's change with what must commit with it. */
export interface ObjectChange<Row> {
  /** The object as it is to be written. */
  readonly row: Row;
  /** For a claimed object: the claim the change is written under, which the same statement ends. */
  readonly token?: string;
  /** The event of the status it entered, if it changed (or of a new object's first status, unless it is a record made before its processor is asked). */
  readonly event: EventRow | undefined;
  readonly jobs: readonly NewJob[];
  /** The balance transactions its movements of money make (ledger/entries.ts). */
  readonly entries: readonly LedgerEntry[];
  /** Whether its status is final, which ends its pending jobs. */
  readonly final: boolean;
  /** Its call's response, stored as the call's idempotency key's answer in the same statement. */
  readonly answer: KeyAnswer | undefined;
}

/**
 * What became of a change: written; refused by its resource's guard (a new object); its id taken (a
 * new object); its claim lost (another operation took the object over); or its call's idempotency
 * key taken over by a retry, so neither the change nor the answer was written.
 */
export type ChangeOutcome = "written" | "refused" | "taken" | "claim_lost" | "key_lost";

/**
 * The change of a locked or claimed object from `previousStatus`: with the event and the jobs of its
 * new status only when the status changed.
 */
export function changeOf<Row extends StatusRow, Desc extends DescMessage>(
  clock: Clock,
  resource: Resource<Row, Desc>,
  row: Row,
  previousStatus: Row["status"],
  jobs: readonly NewJob[],
  more: { token?: string; answer?: KeyAnswer } = {},
): ObjectChange<Row> {
  const changed = row.status !== previousStatus;
  const final = finalized(resource, row);
  return {
    row,
    token: more.token,
    event: changed ? eventOf(resource, row, clock) : undefined,
    jobs: changed ? jobs : [],
    entries: changed ? entriesOf(clock, resource, row, previousStatus) : [],
    final,
    answer: more.answer,
  };
}

/** A new object's change: announced with the event of its first status, unless it is a record made before its processor is asked. */
export function creationOf<Row extends StatusRow, Desc extends DescMessage>(
  clock: Clock,
  resource: Resource<Row, Desc>,
  row: Row,
  jobs: readonly NewJob[],
  more: { announced: boolean; answer?: KeyAnswer },
): ObjectChange<Row> {
  const final = finalized(resource, row);
  return {
    row,
    event: more.announced ? eventOf(resource, row, clock) : undefined,
    jobs,
    entries: entriesOf(clock, resource, row, undefined),
    final,
    answer: more.answer,
  };
}

/** The ledger entries of the object's change from `previous` (undefined for a new object). */
function entriesOf<Row extends StatusRow, Desc extends DescMessage>(
  clock: Clock,
  resource: Resource<Row, Desc>,
  row: Row,
  previous: Row["status"] | undefined,
): LedgerEntry[] {
  return (resource.movements?.(row, previous) ?? []).map((movement) => entryOf(clock, movement));
}

/** Whether the object's status is final, having cleared what a final object must not keep. */
function finalized<Row extends StatusRow, Desc extends DescMessage>(resource: Resource<Row, Desc>, row: Row): boolean {
  const final = resource.states.isFinal(row.status);
  if (final) resource.onFinal?.(row);
  return final;
}

/** Whether the resource's changes can move money, so that its statement writes ledger entries (from its rows' `currency`). */
function movesMoney<Row extends StatusRow, Desc extends DescMessage>(resource: Resource<Row, Desc>): boolean {
  return resource.movements !== undefined;
}

/** Each resource's statement texts, one per holding, built once. */
const texts = new WeakMap<object, Map<Holding, string>>();

/**
 * The statement writing any number of changes of one resource's objects held one way, from their
 * columns' arrays (so it is prepared once per connection). An object is written when its call still
 * holds its idempotency key, and:
 * - new: the resource's `guard` allows it and no object has its key yet. The key is decided by the
 *   primary key's own conflict check (`ON CONFLICT … DO NOTHING`), which always uses its index and
 *   waits for an object of the same key still being written, rather than by a lookup whose cached
 *   plan was made while the table was empty;
 * - claimed: its claim still holds it.
 * Everything else follows a written object by its position in the batch, never by its key: a written
 * key names one position only because no batch holds two changes of one object (db/batches.ts).
 * It answers, per position, whether the key was lost, the guard allowed it, and it was written, and on
 * the first position the webhook deliveries it wrote when they are leased to this instance.
 */
function statementText(connection: DataSource, resource: Resource<StatusRow, DescMessage>, holding: Holding): string {
  let byHolding = texts.get(resource);
  if (byHolding === undefined) {
    byHolding = new Map();
    texts.set(resource, byHolding);
  }
  let text = byHolding.get(holding);
  if (text !== undefined) return text;
  const object = connection.getMetadata(resource.entity);
  const event = connection.getMetadata(EventRow);
  const job = connection.getMetadata(JobRow);
  const { columns, names } = insertShapeOf(object);
  const heldToken = holding === "claimed" ? [{ name: "held_token", type: "varchar" }] : [];
  const eventParam = 1 + columns.length + heldToken.length;
  const jobParam = eventParam + insertShapeOf(event).columns.length + 1;
  const finalParam = jobParam + insertShapeOf(job).columns.length + 1;
  const leaseParam = finalParam + 2;
  const key = object.primaryColumns.map((c) => `"${c.databaseName}"`);
  const guard = holding === "new" && resource.guard !== undefined ? ` AND ${resource.guard("input")}` : "";
  const set = columns.filter((c) => !c.isPrimary).map((c) => `"${c.databaseName}" = input."${c.databaseName}"`);
  const sameRow = [
    ...key.map((name) => `t.${name} = input.${name}`),
    ...(holding === "claimed" ? ["t.claim_token = input.held_token"] : []),
  ];
  const idColumn = object.findColumnWithPropertyName(resource.idProperty)!.databaseName;
  const objectId = `input."${idColumn}"`;
  const written =
    holding === "new"
      ? `object AS (INSERT INTO "${object.tableName}" (${names}) SELECT ${names} FROM allowed ON CONFLICT (${key.join(", ")}) DO NOTHING RETURNING ${key.join(", ")}),\n` +
        `written AS (SELECT allowed.position FROM allowed JOIN object USING (${key.join(", ")}))`
      : `written AS (UPDATE "${object.tableName}" AS t SET ${set.join(", ")} FROM allowed AS input WHERE ${sameRow.join(" AND ")} RETURNING input.position)`;
  text =
    `WITH input AS (SELECT * FROM ${unnestOf(object, "input", 1, "ordinality", heldToken)}),\n` +
    `${keyAnswersSql(leaseParam + 1)},\n` +
    `allowed AS (SELECT * FROM input WHERE position NOT IN (SELECT position FROM key_lost)${guard}),\n` +
    `${written},\n` +
    `event AS (INSERT INTO "${event.tableName}" (${insertShapeOf(event).names}) SELECT ${qualifiedNames(event, "e")} FROM ${unnestOf(event, "e", eventParam, "array")} JOIN written USING (position) RETURNING ${eventsReturning}),\n` +
    `delivery AS (${deliveriesSql("event", `$${leaseParam}::timestamptz`)}),\n` +
    `job AS (INSERT INTO "${job.tableName}" (${insertShapeOf(job).names}) SELECT ${qualifiedNames(job, "j")} FROM ${unnestOf(job, "j", jobParam, "array")} JOIN written USING (position)),\n` +
    // A final status makes the object's pending jobs pointless. A job a runner has claimed is skipped,
    // not waited for: the runner holds the job's lock and then waits for the object, which this
    // statement holds, so waiting would deadlock (a cancel racing the processing of a due scheduled
    // refund). That runner finds the object final, leaves it alone and deletes its job itself. A job
    // of the caller's own transaction (a handler ending it) is not skipped.
    `ended_jobs AS (DELETE FROM jobs WHERE job_id IN (SELECT jobs.job_id FROM jobs JOIN input ON jobs.merchant_id = input.merchant_id ` +
    `AND jobs.livemode = input.livemode AND jobs.object_id = ${objectId} JOIN written ON written.position = input.position ` +
    `WHERE input.position = ANY ($${finalParam}::bigint[]) AND starts_with(jobs.kind, $${finalParam + 1}::text) FOR UPDATE OF jobs SKIP LOCKED)),\n` +
    `answered AS (${completedKeysSql("written")})` +
    (movesMoney(resource) ? `,\n${ledgerSql(leaseParam + 1 + keyAnswerParamCount, "written", "input", idColumn)}` : "") +
    "\n" +
    `SELECT position, key_lost.position IS NOT NULL AS key_lost, allowed.position IS NOT NULL AS allowed, written.position IS NOT NULL AS written, ` +
    `CASE WHEN position = 1 AND $${leaseParam}::timestamptz IS NOT NULL THEN (${handedOverSql("delivery")}) END AS deliveries ` +
    `FROM input LEFT JOIN key_lost USING (position) LEFT JOIN allowed USING (position) LEFT JOIN written USING (position)`;
  byHolding.set(holding, text);
  return text;
}

/** What the statement says of each change, by its position (from 1) in the batch. */
interface Verdict {
  position: string;
  key_lost: boolean;
  allowed: boolean;
  written: boolean;
  /** On the first position only: the webhook deliveries the statement wrote (`handedOverSql`), or null for none. */
  deliveries: string | null;
}

/** What writing a batch of changes did: each one's outcome, in order, and the deliveries leased to this instance. */
export interface Written {
  readonly outcomes: ChangeOutcome[];
  readonly deliveries: HandedOver[];
}

/**
 * Writes changes of one resource's objects held one way, no two of one object, in one statement on
 * `em` (in its transaction when it has one), their webhook deliveries leased until `lease` when given.
 * Throws when PostgreSQL rejects the statement, which then wrote nothing.
 */
export async function writeChanges<Row extends StatusRow, Desc extends DescMessage>(
  em: EntityManager,
  clock: Clock,
  resource: Resource<Row, Desc>,
  holding: Holding,
  changes: readonly ObjectChange<Row>[],
  lease: string | undefined,
): Promise<Written> {
  const metadata = em.connection.getMetadata(EventRow);
  const positions = (has: (change: ObjectChange<Row>) => number) => changes.flatMap((change, i) => Array<number>(has(change)).fill(i + 1));
  const events = changes.flatMap((change) => (change.event === undefined ? [] : [change.event]));
  const eventArrays = arraysOf(metadata, events);
  const params = [
    ...arraysOf(
      em.connection.getMetadata(resource.entity),
      changes.map((change) => change.row),
    ),
    ...(holding === "claimed" ? [changes.map((change) => change.token)] : []),
    ...eventArrays,
    positions((change) => (change.event === undefined ? 0 : 1)),
    ...arraysOf(
      em.connection.getMetadata(JobRow),
      changes.flatMap((change) => change.jobs.map((job) => jobRowOf(job, clock))),
    ),
    positions((change) => change.jobs.length),
    positions((change) => (change.final ? 1 : 0)),
    `${resource.name}.`,
    lease ?? null,
    ...keyAnswerArrays(changes.flatMap((change, i) => (change.answer === undefined ? [] : [{ answer: change.answer, position: i + 1 }]))),
    ...(movesMoney(resource)
      ? ledgerArrays(changes.flatMap((change, i) => change.entries.map((entry) => ({ entry, position: i + 1 }))))
      : []),
  ];
  const text = statementText(em.connection, resource as unknown as Resource<StatusRow, DescMessage>, holding);
  const verdicts = new Map((await preparedIn<Verdict>(em, text, params)).map((v) => [Number(v.position), v]));
  const outcomes = changes.map((_, i): ChangeOutcome => {
    const verdict = verdicts.get(i + 1)!;
    if (verdict.key_lost) return "key_lost";
    if (verdict.written) return "written";
    if (holding !== "new") return "claim_lost";
    return verdict.allowed ? "taken" : "refused";
  });
  const answer = verdicts.get(1)?.deliveries;
  if (answer === null || answer === undefined) return { outcomes, deliveries: [] };
  const dataColumn = insertShapeOf(metadata).columns.findIndex((column) => column.propertyName === "data");
  return { outcomes, deliveries: handedOver(answer, events, eventArrays[dataColumn] as string[]) };
}

/** The row of a job to schedule, not yet attempted. */
export function jobRowOf(job: NewJob, clock: Clock): JobRow {
  return Object.assign(new JobRow(), { ...job, status: "pending", attempts: 0, lastError: null, created: clock.now() });
}
