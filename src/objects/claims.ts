import { setTimeout as sleep } from "node:timers/promises";
import type { DescMessage } from "@bufbuild/protobuf";
import type { DataSource, EntityManager, EntityMetadata } from "typeorm";
import type { Clock } from "../clock.js";
import { notFound } from "../errors.js";
import { randomBase62 } from "../ids.js";
import { objectClaimMs } from "../leases.js";
import { isDatabaseUnavailable } from "../db/errors.js";
import { holderGone, holderOf } from "../db/liveness.js";
import { rowFromDatabase } from "../db/lock.js";
import { preparedQuery } from "../db/prepared.js";
import { ReleaseRetries } from "../db/release-retries.js";
import { StatementBatches } from "../db/batches.js";
import { sqlType } from "../db/statement.js";
import { idOf, lockObject, type Resource, type StatusRow } from "./resource.js";
import { objectKey, type Scope } from "../db/scope.js";

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
 * How long a claim lasts (src/leases.ts). A claim whose instance died mid-call ends as soon as the
 * instance is seen gone (liveness.ts), or after this at the latest; what its operation recorded is
 * then settled by whoever claims the object next, or by recovery.
 */
export const claimLeaseMs = objectClaimMs;

/** Longest pause between two looks at a claimed object. */
const longestPauseMs = 100;

/** Thrown inside a transaction that met an object another operation holds; the transaction is tried again. */
class ObjectClaimed extends Error {}

/**
 * The error that makes `waitingForClaims` try its attempt again after a pause: for an attempt that
 * found the object held, or changed under it, by another operation.
 */
export function objectBusy(message: string): Error {
  return new ObjectClaimed(message);
}

/**
 * SQL condition, true when no live claim holds the row of `table` (an alias) at `now` (an SQL
 * expression): never claimed, its lease over, or its holder gone. What a claim statement waits out.
 */
export function unclaimedSql(table: string, now: string): string {
  return `(${table}.claim_token IS NULL OR ${table}.claimed_until <= ${now} OR ${holderGone(`${table}.claimed_by`)})`;
}

function isClaimed(row: ClaimableRow, now: Date): boolean {
  return row.claimToken !== null && row.claimedUntil !== null && row.claimedUntil > now;
}

/** A resource's claim statements. */
interface ClaimStatements {
  readonly metadata: EntityMetadata;
  /**
   * Claims any number of objects, keyed by merchant, environment and id ($1, $2, $3 arrays), each for
   * its token ($4 array) when no live claim holds it: until $5, at $6, for holder $7. One row per
   * object, by its place in the arrays (`batch_position`): whether it was claimed (`won`, with the
   * object's columns) or does not exist (`missing`).
   */
  readonly claim: string;
  /** Whether the object's claim belongs to an instance that is gone, keyed by merchant, environment and id ($1, $2, $3). */
  readonly holderGone: string;
  /** Ends the claim of token $4, keyed as holderGone. */
  readonly release: string;
}

const statements = new WeakMap<object, ClaimStatements>();

/** The claim statements of a resource, built once: claiming is on the path of every confirm and capture. */
function statementsOf<Row extends ClaimableRow>(dataSource: DataSource, resource: Resource<Row, DescMessage>): ClaimStatements {
  let built = statements.get(resource);
  if (built === undefined) {
    const metadata = dataSource.getMetadata(resource.entity);
    const keyColumns = ["merchantId", "livemode", resource.idProperty].map((property) => metadata.findColumnWithPropertyName(property)!);
    const names = keyColumns.map((column) => `"${column.databaseName}"`);
    const key = names.map((name, i) => `${name} = $${i + 1}`).join(" AND ");
    const joined = (alias: string) => names.map((name) => `${alias}.${name} = input.${name}`).join(" AND ");
    const table = `"${metadata.tableName}"`;
    built = {
      metadata,
      claim:
        `WITH input AS (SELECT * FROM unnest(${keyColumns.map((column, i) => `$${i + 1}::${sqlType(column)}[]`).join(", ")}, $4::varchar[]) ` +
        `WITH ORDINALITY AS input(${names.join(", ")}, token, batch_position)),\n` +
        `claimed AS (UPDATE ${table} AS t SET claim_token = input.token, claimed_until = $5, claimed_by = $7::integer FROM input ` +
        `WHERE ${joined("t")} AND ${unclaimedSql("t", "$6")} ` +
        `RETURNING input.batch_position AS claimed_position, t.*)\n` +
        `SELECT input.batch_position, claimed.claimed_position IS NOT NULL AS won, ` +
        `claimed.claimed_position IS NULL AND NOT EXISTS (SELECT 1 FROM ${table} AS o WHERE ${joined("o")}) AS missing, claimed.* ` +
        `FROM input LEFT JOIN claimed ON claimed.claimed_position = input.batch_position`,
      holderGone: `SELECT ${holderGone("claimed_by")} AS gone FROM ${table} WHERE ${key}`,
      release: `UPDATE ${table} SET claim_token = NULL, claimed_until = NULL WHERE ${key} AND claim_token = $4`,
    };
    statements.set(resource, built);
  }
  return built;
}

/** One object to claim for an operation. */
interface ClaimRequest {
  readonly merchantId: string;
  readonly livemode: boolean;
  readonly id: string;
  readonly token: string;
}

/** What a claim met: the object's row, now held; an object another operation holds; or no object. */
type ClaimOutcome = Record<string, unknown> | "held" | "missing";

/** Claims a batch of objects of `resource` in one statement: what each claim met, in order. */
async function claimAll<Row extends ClaimableRow>(
  dataSource: DataSource,
  clock: Clock,
  resource: Resource<Row, DescMessage>,
  batch: readonly ClaimRequest[],
): Promise<ClaimOutcome[]> {
  const now = clock.now();
  const rows = await preparedQuery<{ batch_position: string; won: boolean; missing: boolean }>(
    dataSource,
    statementsOf(dataSource, resource).claim,
    [
      batch.map((request) => request.merchantId),
      batch.map((request) => request.livemode),
      batch.map((request) => request.id),
      batch.map((request) => request.token),
      new Date(now.getTime() + claimLeaseMs),
      now,
      holderOf(dataSource),
    ],
  );
  const outcomes = new Map(
    rows.map((row): [number, ClaimOutcome] => [Number(row.batch_position), row.won ? row : row.missing ? "missing" : "held"]),
  );
  return batch.map((_, i) => outcomes.get(i + 1)!);
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
  if (isClaimed(row, clock.now()) && !(await claimHolderGone(em, resource, scope, id))) {
    throw new ObjectClaimed(`${resource.name} ${id} is claimed`);
  }
  return row;
}

/** Whether the live-looking claim on a locked object belongs to an instance that is gone, so the change need not wait for it. */
async function claimHolderGone<Row extends ClaimableRow>(
  em: EntityManager,
  resource: Resource<Row, DescMessage>,
  scope: Scope,
  id: string,
): Promise<boolean> {
  const [found] = (await em.query(statementsOf(em.connection, resource).holderGone, [scope.merchantId, scope.livemode, id])) as {
    gone: boolean;
  }[];
  return found?.gone === true;
}

/** An object this operation holds, with the token its outcome is written under. */
export interface Claimed<Row> {
  readonly row: Row;
  readonly token: string;
}

/**
 * The claims this instance makes on objects, owned by the App: the ones operations make at about the
 * same time go to PostgreSQL together, one statement per resource (src/db/batches.ts), since a
 * confirm or a capture is a claim and an outcome, and each would otherwise commit on its own; and the
 * releases the database could not make when asked are made once it is back.
 */
export class ObjectClaims {
  private readonly batches = new Map<object, StatementBatches<ClaimRequest, ClaimOutcome>>();
  private readonly releases = new ReleaseRetries();

  constructor(
    private readonly dataSource: DataSource,
    private readonly clock: Clock,
  ) {}

  /**
   * Claims an object for an operation that calls a processor, in one statement, waiting while another
   * operation holds it. `check` (the status guard, the client secret) then decides on the claimed row:
   * when it throws, the claim is released and the error goes to the caller; when it returns false,
   * the claim is released and the result is undefined (a job whose object moved on).
   */
  async claim<Row extends ClaimableRow>(
    resource: Resource<Row, DescMessage>,
    scope: Scope,
    id: string,
    check: (row: Row) => boolean,
    signal?: AbortSignal,
  ): Promise<Claimed<Row> | undefined> {
    const token = randomBase62(24);
    const sql = statementsOf(this.dataSource, resource);
    const batches = this.batchesOf(resource);
    const claiming = waitingForClaims(async () => {
      const outcome = await batches.add({ merchantId: scope.merchantId, livemode: scope.livemode, id, token }, objectKey(scope, id));
      if (outcome === "missing") throw notFound(resource.label, id);
      if (outcome === "held") throw new ObjectClaimed(`${resource.name} ${id} is claimed`);
      return rowFromDatabase<Row>(sql.metadata, outcome);
    }, signal);
    let claimed: Row;
    try {
      claimed = await claiming;
    } catch (error) {
      // The claim may have committed with its answer lost (the database went away meanwhile): end it once the database is back.
      if (isDatabaseUnavailable(error)) {
        const release = async () => void (await this.dataSource.query(sql.release, [scope.merchantId, scope.livemode, id, token]));
        this.releases.add(token, release, claimLeaseMs);
      }
      throw error;
    }
    let proceed: boolean;
    try {
      proceed = check(claimed);
    } catch (error) {
      await this.release(resource, { row: claimed, token });
      throw error;
    }
    if (proceed) return { row: claimed, token };
    await this.release(resource, { row: claimed, token });
    return undefined;
  }

  /**
   * The claim columns of a new object written already held by the operation that writes it (a
   * payment recorded before its processor is asked), as the claim statement would set them.
   */
  newClaim(): { claimToken: string; claimedUntil: Date; claimedBy: number | null } {
    return {
      claimToken: randomBase62(24),
      claimedUntil: new Date(this.clock.now().getTime() + claimLeaseMs),
      claimedBy: holderOf(this.dataSource),
    };
  }

  /** Ends a claim without an outcome to write: the processor failed, or the operation decided not to go on. */
  async release<Row extends ClaimableRow>(resource: Resource<Row, DescMessage>, claim: Claimed<Row>): Promise<void> {
    await this.dataSource.query(statementsOf(this.dataSource, resource).release, [
      claim.row.merchantId,
      claim.row.livemode,
      idOf(resource, claim.row),
      claim.token,
    ]);
  }

  /**
   * Runs what follows a claim (the processor call, the commit of its outcome) and, when it fails,
   * releases the claim at once rather than at the end of its lease, so a retry need not wait.
   */
  async finish<Row extends ClaimableRow, T>(
    resource: Resource<Row, DescMessage>,
    claim: Claimed<Row>,
    finish: () => Promise<T>,
  ): Promise<T> {
    try {
      return await finish();
    } catch (error) {
      const release = () => this.release(resource, claim);
      // The caller hears of the failure at once: a claim the database cannot end now (it just failed the
      // operation, or fails the release) is ended once it can.
      if (isDatabaseUnavailable(error)) this.releases.add(claim.token, release, claimLeaseMs);
      else await release().catch(() => this.releases.add(claim.token, release, claimLeaseMs));
      throw error;
    }
  }

  /** The claim batches of `resource`, made on first use. */
  private batchesOf<Row extends ClaimableRow>(resource: Resource<Row, DescMessage>): StatementBatches<ClaimRequest, ClaimOutcome> {
    let batches = this.batches.get(resource);
    if (batches === undefined) {
      batches = new StatementBatches((batch) => claimAll(this.dataSource, this.clock, resource, batch));
      this.batches.set(resource, batches);
    }
    return batches;
  }
}
