import type { DescMessage } from "@bufbuild/protobuf";
import pg from "pg";
import type { DataSource, EntityManager, EntityMetadata } from "typeorm";
import type { Clock } from "../clock.js";
import { EventRow } from "../events/event.entity.js";
import { JobRow } from "../jobs/job.entity.js";
import type { NewJob } from "../jobs/runner.js";
import { jobRowOf } from "./follow-ups.js";
import { preparedQuery } from "./prepared.js";
import { eventOf, idOf, type Resource, type StatusRow } from "./resource.js";
import { columnValue, insertShapeOf } from "./statement.js";
import { unitManager } from "./unit-of-work.js";

/** A new object with the jobs its first status needs. */
interface NewObject<Row> {
  readonly row: Row;
  readonly jobs: readonly NewJob[];
}

/** `unnest($1::type[], …) AS alias(columns)`: one row per entity, each column's values sent as one array. */
function unnestOf(metadata: EntityMetadata, alias: string, firstParam: number): string {
  const { names, types } = insertShapeOf(metadata);
  return `unnest(${types.map((type, i) => `$${firstParam + i}::${type}[]`).join(", ")}) AS ${alias}(${names})`;
}

/** Each column's values over all the entities, one array per column in the order `unnestOf` reads them. */
function arraysOf(metadata: EntityMetadata, entities: readonly object[]): unknown[][] {
  return insertShapeOf(metadata).columns.map((column) => entities.map((entity) => columnValue(column, entity)));
}

/** Each resource's statement text, built once. */
const texts = new WeakMap<object, string>();

/**
 * The statement that writes any number of new objects of one resource with their first events and
 * jobs: the rows arrive as one array per column, so its text is the same for one object or a hundred
 * and is prepared once per connection. An object the resource's `guard` rejects is not written, nor
 * are its event and jobs; the statement returns the keys of the objects it wrote.
 */
function statementText<Row extends StatusRow, Desc extends DescMessage>(em: EntityManager, resource: Resource<Row, Desc>): string {
  let text = texts.get(resource);
  if (text !== undefined) return text;
  const object = em.connection.getMetadata(resource.entity);
  const event = em.connection.getMetadata(EventRow);
  const job = em.connection.getMetadata(JobRow);
  const id = object.findColumnWithPropertyName(resource.idProperty)!.databaseName;
  const { names } = insertShapeOf(object);
  const eventParam = 1 + insertShapeOf(object).columns.length;
  const jobParam = eventParam + insertShapeOf(event).columns.length;
  const joinsObject = (alias: string) =>
    `JOIN object ON object.merchant_id = ${alias}.merchant_id AND object.livemode = ${alias}.livemode AND object."${id}" = ${alias}.object_id`;
  const guard = resource.guard === undefined ? "" : ` WHERE ${resource.guard("input")}`;
  text =
    `WITH input AS (SELECT * FROM ${unnestOf(object, "input", 1)}),\n` +
    `object AS (INSERT INTO "${object.tableName}" (${names}) SELECT ${names} FROM input${guard} RETURNING merchant_id, livemode, "${id}"),\n` +
    `event AS (INSERT INTO "${event.tableName}" (${insertShapeOf(event).names}) SELECT e.* FROM ${unnestOf(event, "e", eventParam)} ${joinsObject("e")} RETURNING 1),\n` +
    `job AS (INSERT INTO "${job.tableName}" (${insertShapeOf(job).names}) SELECT j.* FROM ${unnestOf(job, "j", jobParam)} ${joinsObject("j")} RETURNING 1)\n` +
    `SELECT merchant_id, livemode, "${id}" AS id FROM object`;
  texts.set(resource, text);
  return text;
}

function keyOf(merchantId: string, livemode: boolean, id: string): string {
  return `${merchantId}\u0000${String(livemode)}\u0000${id}`;
}

/** Writes new objects of one resource in one statement with `query`; for each, whether it was written. */
async function writeNewObjects<Row extends StatusRow, Desc extends DescMessage>(
  em: EntityManager,
  clock: Clock,
  resource: Resource<Row, Desc>,
  objects: readonly NewObject<Row>[],
  query: (text: string, params: unknown[]) => Promise<{ merchant_id: string; livemode: boolean; id: string }[]>,
): Promise<boolean[]> {
  const rows = objects.map((o) => o.row);
  const params = [
    ...arraysOf(em.connection.getMetadata(resource.entity), rows),
    ...arraysOf(em.connection.getMetadata(EventRow), rows.map((row) => eventOf(resource, row, clock))),
    ...arraysOf(em.connection.getMetadata(JobRow), objects.flatMap((o) => o.jobs.map((job) => jobRowOf(job, clock)))),
  ];
  const written = new Set((await query(statementText(em, resource), params)).map((r) => keyOf(r.merchant_id, r.livemode, r.id)));
  return rows.map((row) => written.has(keyOf(row.merchantId, row.livemode, idOf(resource, row))));
}

/**
 * Writes a new object (a refund, a dispute) with its first event and its jobs in the caller's
 * transaction. False when the resource's guard stopped it.
 */
export async function writeNewObject<Row extends StatusRow, Desc extends DescMessage>(
  em: EntityManager,
  clock: Clock,
  resource: Resource<Row, Desc>,
  row: Row,
  jobs: readonly NewJob[],
): Promise<boolean> {
  const [written] = await writeNewObjects(em, clock, resource, [{ row, jobs }], (text, params) => em.query(text, params));
  return written!;
}

/** PostgreSQL rejected the statement, so (outside a transaction) it wrote nothing at all. */
function rejectedByDatabase(error: unknown): boolean {
  return error instanceof pg.DatabaseError && error.severity === "ERROR";
}

/** Batches being written at once per resource: more would only make each batch smaller. */
const concurrentBatches = 2;
/** Most objects in one statement. */
const largestBatch = 200;

interface Waiting<Row> extends NewObject<Row> {
  resolve(written: boolean): void;
  reject(error: unknown): void;
}

/** The objects of one resource waiting to be written, and the batches on their way. */
class Queue<Row extends StatusRow, Desc extends DescMessage> {
  private readonly waiting: Waiting<Row>[] = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    private readonly dataSource: DataSource,
    private readonly clock: Clock,
    private readonly resource: Resource<Row, Desc>,
  ) {}

  add(object: NewObject<Row>): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ ...object, resolve, reject });
      this.schedule();
    });
  }

  /** Sends at the end of this event-loop turn, so that every call that reaches here in it shares the batch. */
  private schedule(): void {
    if (this.scheduled || this.inFlight >= concurrentBatches || this.waiting.length === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      while (this.inFlight < concurrentBatches && this.waiting.length > 0) void this.send(this.waiting.splice(0, largestBatch));
    });
  }

  private async send(batch: Waiting<Row>[]): Promise<void> {
    this.inFlight++;
    try {
      const written = await this.write(batch);
      batch.forEach((waiting, i) => waiting.resolve(written[i]!));
    } catch (error) {
      if (batch.length > 1 && rejectedByDatabase(error)) {
        // One object failed (a caller-chosen id taken, say) and took the batch with it: each alone
        // gets its own answer.
        await Promise.all(batch.map((waiting) => this.write([waiting]).then(([w]) => waiting.resolve(w!), waiting.reject)));
      } else {
        for (const waiting of batch) waiting.reject(error);
      }
    } finally {
      this.inFlight--;
      this.schedule();
    }
  }

  private write(batch: readonly NewObject<Row>[]): Promise<boolean[]> {
    return writeNewObjects(this.dataSource.manager, this.clock, this.resource, batch, (text, params) =>
      preparedQuery(this.dataSource, text, params),
    );
  }
}

/**
 * Writes new objects that are created outside any transaction (payments, payouts). The ones that
 * calls write at about the same time go to PostgreSQL together, one statement and one commit for
 * all: the commit, not the rows, is most of what a write costs the database, so under load this is
 * what keeps it from being the bottleneck. Each call still answers only once its object has
 * committed. Inside a unit of work (a call with an idempotency key) the object is written in the
 * unit's transaction instead, on its own.
 */
export class NewObjectWriter {
  private readonly queues = new Map<Resource<StatusRow, DescMessage>, Queue<StatusRow, DescMessage>>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly clock: Clock,
  ) {}

  /** Writes `row` with its first event and `jobs`; false when the resource's guard stopped it. */
  write<Row extends StatusRow, Desc extends DescMessage>(resource: Resource<Row, Desc>, row: Row, jobs: readonly NewJob[]): Promise<boolean> {
    const unit = unitManager();
    if (unit !== undefined) return writeNewObject(unit, this.clock, resource, row, jobs);
    const key = resource as unknown as Resource<StatusRow, DescMessage>;
    let queue = this.queues.get(key);
    if (queue === undefined) {
      queue = new Queue(this.dataSource, this.clock, key);
      this.queues.set(key, queue);
    }
    return queue.add({ row, jobs });
  }
}
