import type { DescMessage, MessageInitShape } from "@bufbuild/protobuf";
import type { EntityManager, EntityTarget } from "typeorm";
import type { Clock } from "../clock.js";
import { notFound, type ApiError } from "../errors.js";
import type { EventRow } from "../events/event.entity.js";
import { newEvent } from "../events/record.js";
import type { StateMachine } from "../state-machine.js";
import type { Movement } from "../ledger/entries.js";
import { findByKey } from "../db/batched-reads.js";
import { lockRow } from "../db/lock.js";
import type { Scope } from "../db/scope.js";

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
   * Clears what an object in a final status must no longer keep, before the change that makes or
   * keeps it final is written (a payout's encrypted destination: it will never be sent again).
   */
  onFinal?(row: Row): void;
  /**
   * An SQL condition on a new object's row (the table `alias`) without which it is not written, e.g.
   * that the profile it names belongs to its merchant.
   */
  guard?(alias: string): string;
  /** The error answering a new object the guard stopped, naming the field (looked up in `em`). */
  refusal?(em: EntityManager, row: Row): Promise<ApiError>;
  /**
   * The movements of the merchant's money its object's change from `previous` (undefined for a new
   * object) makes (decisions §11), written with the change: a payment's capture, a refund's success.
   * Each is in the object's currency, from its `currency` column, and has the object as its source.
   */
  movements?(row: Row, previous: Row["status"] | undefined): readonly Movement[];
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

/**
 * Loads an object of the caller's merchant and environment without locking it (a retrieve, on the
 * hot path of every client that polls), batched with other calls' reads of the same resource.
 */
export async function findObject<Row extends StatusRow, Desc extends DescMessage>(
  em: EntityManager,
  resource: Resource<Row, Desc>,
  scope: Scope,
  id: string,
): Promise<Row> {
  const row = await findByKey(em, resource.entity, resource.idProperty, scope, id);
  if (row === undefined) throw notFound(resource.label, id);
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
