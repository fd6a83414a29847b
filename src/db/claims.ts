import { setTimeout as sleep } from "node:timers/promises";
import type { DescMessage } from "@bufbuild/protobuf";
import type { DataSource, EntityManager } from "typeorm";
import type { Clock } from "../clock.js";
import { notFound } from "../errors.js";
import { randomBase62 } from "../ids.js";
import { rowFromDatabase } from "./lock.js";
import { preparedQuery } from "./prepared.js";
import { idOf, lockObject, type Resource, type Scope, type StatusRow } from "./resource.js";

/*
 * Claims let an operation call a processor without holding a transaction (and a pooled connection)
 * open across the call. The operation claims the object in one statement, calls the processor, then
 * writes the outcome in the statement that releases the claim. While the claim lasts, every other
 * change to the object waits for it, holding nothing: so two operations on one payment still run one
 * after the other, as a row lock held across the call used to make them.
 */

/** A stored object an operation can claim: payments and refunds. */
export interface ClaimableRow extends StatusRow {
  claimToken: string | null;
  claimedUntil: Date | null;
}

/**
 * How long a claim lasts: longer than a processor takes to answer. A claim whose instance died
 * mid-call ends by itself after it; the processor call carries an idempotency key, so the operation
 * run again does not move money twice.
 */
const claimLeaseMs = 60_000;

/** Longest pause between two looks at a claimed object. */
const longestPauseMs = 100;

/** Thrown inside a transaction that met an object another operation holds; the transaction is tried again. */
class ObjectClaimed extends Error {}

function isClaimed(row: ClaimableRow, now: Date): boolean {
  return row.claimToken !== null && row.claimedUntil !== null && row.claimedUntil > now;
}

/** The SQL condition on an object's key columns, with its parameters from `firstParam` on. */
function keyCondition<Row extends ClaimableRow>(
  em: EntityManager,
  resource: Resource<Row, DescMessage>,
  scope: Scope,
  id: string,
  firstParam: number,
) {
  const metadata = em.connection.getMetadata(resource.entity);
  const key = { merchantId: scope.merchantId, livemode: scope.livemode, [resource.idProperty]: id } as Record<string, unknown>;
  const columns = Object.keys(key).map((property) => metadata.findColumnWithPropertyName(property)!);
  return {
    metadata,
    sql: columns.map((column, i) => `"${column.databaseName}" = $${firstParam + i}`).join(" AND "),
    params: columns.map((column) => key[column.propertyName]),
  };
}

/**
 * Runs `attempt` (a transaction) again for as long as it meets an object under another operation's
 * claim, pausing in between without holding anything. A claim lasts one processor call; `signal`
 * (the call's deadline) ends the wait.
 */
export async function waitingForClaims<T>(attempt: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  for (let pauseMs = 1; ; pauseMs = Math.min(pauseMs * 2, longestPauseMs)) {
    try {
      return await attempt();
    } catch (error) {
      if (!(error instanceof ObjectClaimed)) throw error;
    }
    await sleep(pauseMs, undefined, { signal });
  }
}

/**
 * Loads an object and locks its row in the caller's transaction, for a change that does not call a
 * processor. When an operation holds a claim on it, the transaction is rolled back and run again
 * once the claim may be gone: it must run inside `waitingForClaims`.
 */
export async function lockUnclaimed<Row extends ClaimableRow>(
  em: EntityManager,
  clock: Clock,
  resource: Resource<Row, DescMessage>,
  scope: Scope,
  id: string,
): Promise<Row> {
  const row = await lockObject(em, resource, scope, id);
  if (isClaimed(row, clock.now())) throw new ObjectClaimed(`${resource.name} ${id} is claimed`);
  return row;
}

/** An object this operation holds, with the token its outcome is written under. */
export interface Claimed<Row> {
  readonly row: Row;
  readonly token: string;
}

/**
 * Claims an object for an operation that calls a processor, in one statement, waiting while another
 * operation holds it. `check` (the status guard, the client secret) then decides on the claimed row:
 * when it throws, the claim is released and the error goes to the caller; when it returns false,
 * the claim is released and the result is undefined (a job whose object moved on).
 */
export async function claimObject<Row extends ClaimableRow>(
  dataSource: DataSource,
  clock: Clock,
  resource: Resource<Row, DescMessage>,
  scope: Scope,
  id: string,
  check: (row: Row) => boolean,
  signal?: AbortSignal,
): Promise<Claimed<Row> | undefined> {
  const token = randomBase62(24);
  const claimed = await waitingForClaims(async () => {
    const now = clock.now();
    const key = keyCondition(dataSource.manager, resource, scope, id, 4);
    const [raw] = await preparedQuery<Record<string, unknown>>(
      dataSource,
      `UPDATE "${key.metadata.tableName}" SET claim_token = $1, claimed_until = $2
        WHERE ${key.sql} AND (claim_token IS NULL OR claimed_until <= $3) RETURNING *`,
      [token, new Date(now.getTime() + claimLeaseMs), now, ...key.params],
    );
    if (raw !== undefined) return rowFromDatabase<Row>(key.metadata, raw);
    const lookup = keyCondition(dataSource.manager, resource, scope, id, 1);
    const exists = (await dataSource.query(`SELECT 1 FROM "${lookup.metadata.tableName}" WHERE ${lookup.sql}`, lookup.params)) as unknown[];
    if (exists.length === 0) throw notFound(resource.label, id);
    throw new ObjectClaimed(`${resource.name} ${id} is claimed`);
  }, signal);
  let proceed: boolean;
  try {
    proceed = check(claimed);
  } catch (error) {
    await releaseClaim(dataSource, resource, { row: claimed, token });
    throw error;
  }
  if (proceed) return { row: claimed, token };
  await releaseClaim(dataSource, resource, { row: claimed, token });
  return undefined;
}

/** Ends a claim without an outcome to write: the processor failed, or the operation decided not to go on. */
export async function releaseClaim<Row extends ClaimableRow>(
  dataSource: DataSource,
  resource: Resource<Row, DescMessage>,
  claim: Claimed<Row>,
): Promise<void> {
  const key = keyCondition(dataSource.manager, resource, claim.row, idOf(resource, claim.row), 2);
  await dataSource.query(
    `UPDATE "${key.metadata.tableName}" SET claim_token = NULL, claimed_until = NULL WHERE ${key.sql} AND claim_token = $1`,
    [claim.token, ...key.params],
  );
}

/**
 * Runs what follows a claim (the processor call, the commit of its outcome) and, when it fails,
 * releases the claim at once rather than at the end of its lease, so a retry need not wait.
 */
export async function finishClaimed<Row extends ClaimableRow, T>(
  dataSource: DataSource,
  resource: Resource<Row, DescMessage>,
  claim: Claimed<Row>,
  finish: () => Promise<T>,
): Promise<T> {
  try {
    return await finish();
  } catch (error) {
    await releaseClaim(dataSource, resource, claim);
    throw error;
  }
}
