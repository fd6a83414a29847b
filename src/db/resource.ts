import type { DescMessage, MessageInitShape } from "@bufbuild/protobuf";
import type { EntityManager, EntityTarget } from "typeorm";
import type { Clock } from "../clock.js";
import { claimLost, notFound, type ApiError } from "../errors.js";
import type { EventRow } from "../events/event.entity.js";
import { newEvent } from "../events/record.js";
import type { NewJob } from "../jobs/runner.js";
import type { StateMachine } from "../state-machine.js";
import { addEndOfJobs, addFollowUps } from "./follow-ups.js";
import { lockRow } from "./lock.js";
import { Statement } from "./statement.js";

/** Which merchant and environment a call acts in: the partition every object lives in. */
export interface Scope {
  readonly merchantId: string;
  readonly livemode: boolean;
}

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

/** Loads an object of the caller's merchant and environment without locking it (reads). */
export async function findObject<Row extends StatusRow, Desc extends DescMessage>(
  em: EntityManager,
  resource: Resource<Row, Desc>,
  scope: Scope,
  id: string,
): Promise<Row> {
  const where = { merchantId: scope.merchantId, livemode: scope.livemode, [resource.idProperty]: id } as never;
  const row = await em.findOneBy(resource.entity, where);
  if (row === null) throw notFound(resource.label, id);
  return row;
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

/**
 * Writes the outcome of an operation that claimed the object (src/db/claims.ts) as writeObjectChange
 * does, releasing the claim in the same statement. Nothing is written when the claim is no longer
 * this operation's: its lease ran out mid-call and another operation took the object, so this
 * outcome must not overwrite what that one did: the request is answered IK_01.
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
): Promise<void> {
  const { row, token } = claimed;
  row.claimToken = null;
  row.claimedUntil = null;
  const statement = new Statement().update("object", em.connection.getMetadata(resource.entity), row, token);
  if ((await runChange(em, clock, resource, row, previousStatus, jobs, statement)) === 0) {
    throw claimLost(resource.name, idOf(resource, row));
  }
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
  const [result] = (await em.query(statement.sql("object"), statement.params)) as [{ n: number }];
  return result.n;
}
