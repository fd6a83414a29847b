import type { DescMessage } from "@bufbuild/protobuf";
import type { EntityManager } from "typeorm";
import type { Clock } from "../clock.js";
import type { NewJob } from "../jobs/runner.js";
import type { Resource, StatusRow } from "./resource.js";
import { writeLockedChange } from "./writer.js";

/**
 * What an operation decided on its locked object: the jobs the object's new status needs, or to
 * leave it alone (a job whose object has moved on).
 */
export type Decision = readonly NewJob[] | "leave";

/**
 * An operation that calls no processor (an update, a cancel, a dispute's accept, a job's expiry): it
 * locks its object in a transaction, decides on it, and its change is written in that transaction.
 * Operations that call a processor claim their object instead (payments/operation.ts).
 */
export interface LockedOperation<Row, D extends Decision = Decision> {
  /** Loads and locks the object, after what must be locked before it (a dispute's payment). */
  lock(em: EntityManager): Promise<Row>;
  /**
   * Guards the object's status and moves it, changes its fields: an error answers the call and
   * nothing is written.
   */
  decide(row: Row, em: EntityManager): D | Promise<D>;
}

/** Runs an operation that always changes its object (the API's), in `em`'s transaction: the object as written. */
export async function runLocked<Row extends StatusRow, Desc extends DescMessage>(
  em: EntityManager,
  clock: Clock,
  resource: Resource<Row, Desc>,
  operation: LockedOperation<Row, readonly NewJob[]>,
): Promise<Row>;
/** Runs an operation in `em`'s transaction: the object as written, or undefined when the operation left it alone. */
export async function runLocked<Row extends StatusRow, Desc extends DescMessage>(
  em: EntityManager,
  clock: Clock,
  resource: Resource<Row, Desc>,
  operation: LockedOperation<Row>,
): Promise<Row | undefined>;
export async function runLocked<Row extends StatusRow, Desc extends DescMessage>(
  em: EntityManager,
  clock: Clock,
  resource: Resource<Row, Desc>,
  operation: LockedOperation<Row>,
): Promise<Row | undefined> {
  const row = await operation.lock(em);
  const previous = row.status;
  const decision = await operation.decide(row, em);
  if (decision === "leave") return undefined;
  await writeLockedChange(em, clock, resource, row, previous, decision);
  return row;
}
