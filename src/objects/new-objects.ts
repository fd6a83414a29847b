import type { DescMessage, MessageInitShape } from "@bufbuild/protobuf";
import type { DataSource, EntityManager } from "typeorm";
import type { Clock } from "../clock.js";
import { alreadyExists, type ApiError } from "../errors.js";
import { EventRow } from "../events/event.entity.js";
import { JobRow } from "../jobs/job.entity.js";
import type { NewJob } from "../jobs/runner.js";
import type { DeliveryHandOff, HandedOver } from "../webhooks/delivery-thread.js";
import { deliveriesSql, eventsReturning, handedOver, handedOverSql } from "../webhooks/schedule.js";
import { jobRowOf } from "./follow-ups.js";
import { rejectedByDatabase, StatementBatches } from "../db/batches.js";
import { preparedIn, preparedQuery } from "../db/prepared.js";
import { eventOf, idOf, type Resource, type StatusRow } from "./resource.js";
import { arraysOf, insertShapeOf, qualifiedNames, unnestOf } from "../db/statement.js";
import type { CallValues, UnitOfWork } from "../db/unit-of-work.js";

/** A new object with the jobs its first status needs. */
interface NewObject<Row> {
  readonly row: Row;
  readonly jobs: readonly NewJob[];
  /**
   * Whether its first status is announced with an event: not for a record written before its
   * processor is asked, whose outcome is the first status anyone hears of.
   */
  readonly announced: boolean;
}

/** What became of a new object: written, refused by its resource's guard, or its id already taken. */
type Outcome = "written" | "refused" | "taken";

/** Each resource's statement text, built once. */
const texts = new WeakMap<object, string>();

/**
 * The statement that writes any number of new objects of one resource with their first events and
 * jobs, and answers for every position in the batch whether the object was allowed and written. The
 * rows arrive as one array per column, so its text is the same for one object or two hundred and is
 * prepared once per connection.
 *
 * An object is written when the resource's `guard` allows it and no object has its key yet. The key
 * is decided by the primary key's own conflict check (`ON CONFLICT … DO NOTHING`), which always uses
 * its index and waits for an object of the same key still being written, rather than by a lookup
 * whose cached plan was made while the table was empty. Events and jobs follow their object by its
 * position, never by its key, and a written key names one position only because no batch holds two
 * objects of one key (`Queue.nextBatch`).
 */
function statementText<Row extends StatusRow, Desc extends DescMessage>(em: EntityManager, resource: Resource<Row, Desc>): string {
  let text = texts.get(resource);
  if (text !== undefined) return text;
  const object = em.connection.getMetadata(resource.entity);
  const event = em.connection.getMetadata(EventRow);
  const job = em.connection.getMetadata(JobRow);
  const { names } = insertShapeOf(object);
  const key = object.primaryColumns.map((c) => `"${c.databaseName}"`).join(", ");
  const eventParam = 1 + insertShapeOf(object).columns.length;
  const jobParam = eventParam + insertShapeOf(event).columns.length + 1;
  const leaseParam = jobParam + insertShapeOf(job).columns.length + 1;
  text =
    `WITH input AS (SELECT * FROM ${unnestOf(object, "input", 1, "ordinality")}),\n` +
    `allowed AS (SELECT * FROM input${resource.guard === undefined ? "" : ` WHERE ${resource.guard("input")}`}),\n` +
    `object AS (INSERT INTO "${object.tableName}" (${names}) SELECT ${names} FROM allowed ON CONFLICT (${key}) DO NOTHING RETURNING ${key}),\n` +
    `written AS (SELECT allowed.position FROM allowed JOIN object USING (${key})),\n` +
    `event AS (INSERT INTO "${event.tableName}" (${insertShapeOf(event).names}) SELECT ${qualifiedNames(event, "e")} FROM ${unnestOf(event, "e", eventParam, "array")} JOIN written USING (position) RETURNING ${eventsReturning}),\n` +
    `delivery AS (${deliveriesSql("event", `$${leaseParam}::timestamptz`)}),\n` +
    `job AS (INSERT INTO "${job.tableName}" (${insertShapeOf(job).names}) SELECT ${qualifiedNames(job, "j")} FROM ${unnestOf(job, "j", jobParam, "array")} JOIN written USING (position))\n` +
    `SELECT position, allowed.position IS NOT NULL AS allowed, written.position IS NOT NULL AS written, ` +
    `CASE WHEN position = 1 AND $${leaseParam}::timestamptz IS NOT NULL THEN (${handedOverSql("delivery")}) END AS deliveries ` +
    `FROM input LEFT JOIN allowed USING (position) LEFT JOIN written USING (position)`;
  texts.set(resource, text);
  return text;
}

/** What the statement says of each new object, by its position (from 1) in the batch. */
interface Verdict {
  position: string;
  allowed: boolean;
  written: boolean;
  /** On the first position only: the webhook deliveries the statement wrote (`handedOverSql`), or null for none. */
  deliveries: string | null;
}

/**
 * Writes new objects of one resource, no two with one key, in one statement with `query`, their
 * webhook deliveries leased until `lease` when given: the outcome of each, in order, and the
 * deliveries it wrote with what sending them needs. Throws when PostgreSQL rejects the statement, which then wrote nothing.
 */
async function writeNewObjects<Row extends StatusRow, Desc extends DescMessage>(
  em: EntityManager,
  clock: Clock,
  resource: Resource<Row, Desc>,
  objects: readonly NewObject<Row>[],
  lease: string | undefined,
  query: (text: string, params: unknown[]) => Promise<Verdict[]>,
): Promise<{ outcomes: Outcome[]; deliveries: HandedOver[] }> {
  const rows = objects.map((o) => o.row);
  const announced = objects.flatMap((o, i) => (o.announced ? [i + 1] : []));
  const events = announced.map((position) => eventOf(resource, rows[position - 1]!, clock));
  const eventArrays = arraysOf(em.connection.getMetadata(EventRow), events);
  const params = [
    ...arraysOf(em.connection.getMetadata(resource.entity), rows),
    ...eventArrays,
    announced,
    ...arraysOf(
      em.connection.getMetadata(JobRow),
      objects.flatMap((o) => o.jobs.map((job) => jobRowOf(job, clock))),
    ),
    objects.flatMap((o, i) => o.jobs.map(() => i + 1)),
    lease ?? null,
  ];
  const verdicts = new Map((await query(statementText(em, resource), params)).map((v) => [Number(v.position), v]));
  const outcomes = rows.map((_, i): Outcome => {
    const verdict = verdicts.get(i + 1)!;
    return verdict.written ? "written" : verdict.allowed ? "taken" : "refused";
  });
  const deliveries = verdicts.get(1)?.deliveries;
  if (deliveries === null || deliveries === undefined) return { outcomes, deliveries: [] };
  return { outcomes, deliveries: handedOver(deliveries, events, eventArrays[eventDataColumn(em)] as string[]) };
}

/** Where the events' data (as JSON) sits among `arraysOf` the events. */
function eventDataColumn(em: EntityManager): number {
  return insertShapeOf(em.connection.getMetadata(EventRow)).columns.findIndex((column) => column.propertyName === "data");
}

/** One object's answer: written (true) or refused by the guard (false); a taken id is HE_01. */
function answerOf<Row extends StatusRow, Desc extends DescMessage>(
  em: EntityManager,
  resource: Resource<Row, Desc>,
  row: Row,
  outcome: Outcome,
): boolean {
  if (outcome === "taken") {
    const idColumn = em.connection.getMetadata(resource.entity).findColumnWithPropertyName(resource.idProperty)!.databaseName;
    throw alreadyExists(resource.name, idColumn, idOf(resource, row));
  }
  return outcome === "written";
}

/**
 * Writes a new object (a refund, a dispute) with its first event and its jobs in the caller's
 * transaction. False when the resource's guard stopped it; HE_01 when its id is taken.
 */
export async function writeNewObject<Row extends StatusRow, Desc extends DescMessage>(
  em: EntityManager,
  clock: Clock,
  resource: Resource<Row, Desc>,
  row: Row,
  jobs: readonly NewJob[],
): Promise<boolean> {
  // Its transaction commits later, so its delivery is left to a look rather than handed over.
  const { outcomes } = await writeNewObjects(em, clock, resource, [{ row, jobs, announced: true }], undefined, (text, params) =>
    preparedIn(em, text, params),
  );
  return answerOf(em, resource, row, outcomes[0]!);
}

/** The new objects of one resource waiting to be written, in batches. */
class Queue<Row extends StatusRow, Desc extends DescMessage> {
  private readonly batches = new StatementBatches<NewObject<Row>, Outcome>((batch) => this.write(batch));
  private readonly keyColumns;

  constructor(
    private readonly dataSource: DataSource,
    private readonly clock: Clock,
    private readonly resource: Resource<Row, Desc>,
    private readonly webhooks: DeliveryHandOff,
  ) {
    this.keyColumns = dataSource.getMetadata(resource.entity).primaryColumns;
  }

  /**
   * Writes the object in the next batch; two objects of one key (or of one `batchKey`) never share a
   * batch, so the second finds the key taken or, if the first was refused, free.
   */
  add(object: NewObject<Row>): Promise<Outcome> {
    const key = this.resource.batchKey?.(object.row) ?? this.keyColumns.map((c) => String(c.getEntityValue(object.row))).join("\u0000");
    return this.batches.add(object, key);
  }

  /** Writes a batch in a statement of its own, which commits it, and hands its webhook deliveries to this instance's sender. */
  private async write(batch: readonly NewObject<Row>[]): Promise<Outcome[]> {
    const lease = this.webhooks.leaseForNew(this.clock.now());
    let written: Awaited<ReturnType<typeof writeNewObjects>>;
    try {
      written = await writeNewObjects(this.dataSource.manager, this.clock, this.resource, batch, lease, (text, params) =>
        preparedQuery(this.dataSource, text, params),
      );
    } catch (error) {
      if (lease !== undefined && !rejectedByDatabase(error)) this.webhooks.abandon(lease);
      throw error;
    }
    if (lease !== undefined && written.deliveries.length > 0) this.webhooks.adopt(written.deliveries, lease);
    return written.outcomes;
  }
}

/**
 * Writes the new objects that calls create (payments, payouts) as those calls' effects. The ones that
 * calls write at about the same time go to PostgreSQL together, one statement and one commit for
 * all (src/db/batches.ts). A call whose effect must commit with its stored response (it carries an
 * idempotency key) writes its object alone, in its own commit.
 */
export class NewObjectWriter {
  private readonly queues = new Map<object, Queue<StatusRow, DescMessage>>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly clock: Clock,
    private readonly units: UnitOfWork,
    private readonly webhooks: DeliveryHandOff,
  ) {}

  /**
   * Writes `row` with its first event and `jobs` as the effect of the call `ctx`, and answers its
   * view: the resource's refusal when its guard stopped it, HE_01 when its id is taken.
   */
  async create<Row extends StatusRow, Desc extends DescMessage>(
    ctx: CallValues,
    resource: Resource<Row, Desc>,
    row: Row,
    jobs: readonly NewJob[],
  ): Promise<MessageInitShape<Desc>> {
    if (this.units.recordsResponse(ctx)) {
      return this.units.commit(ctx, async (em) => {
        if (!(await writeNewObject(em, this.clock, resource, row, jobs))) throw await refusalOf(em, resource, row);
        return resource.view(row);
      });
    }
    if (!answerOf(this.dataSource.manager, resource, row, await this.queueOf(resource).add({ row, jobs, announced: true }))) {
      throw await refusalOf(this.dataSource.manager, resource, row);
    }
    return resource.view(row);
  }

  /**
   * Writes `row` before anyone is told of it: the record an operation makes before it asks a
   * processor, whose outcome is the object's first event and the call's effect. Batched whatever the
   * call sent, since no response is stored with it. "taken" when its id is, which may be a retry
   * meeting the record of the call it repeats; the resource's refusal when its guard stopped it.
   */
  async record<Row extends StatusRow, Desc extends DescMessage>(resource: Resource<Row, Desc>, row: Row): Promise<"written" | "taken"> {
    const outcome = await this.queueOf(resource).add({ row, jobs: [], announced: false });
    if (outcome === "refused") throw await refusalOf(this.dataSource.manager, resource, row);
    return outcome;
  }

  private queueOf<Row extends StatusRow, Desc extends DescMessage>(resource: Resource<Row, Desc>): Queue<Row, Desc> {
    let queue = this.queues.get(resource);
    if (queue === undefined) {
      queue = new Queue(this.dataSource, this.clock, resource as unknown as Resource<StatusRow, DescMessage>, this.webhooks);
      this.queues.set(resource, queue);
    }
    return queue as unknown as Queue<Row, Desc>;
  }
}

/** The error answering a new object its resource's guard stopped. */
async function refusalOf<Row extends StatusRow, Desc extends DescMessage>(
  em: EntityManager,
  resource: Resource<Row, Desc>,
  row: Row,
): Promise<ApiError> {
  if (resource.refusal === undefined)
    throw new Error(`${resource.name}: its guard stopped a new object, and it has no refusal to answer with`);
  return resource.refusal(em, row);
}
