import { createHash } from "node:crypto";
import type pg from "pg";
import type { DataSource, EntityManager } from "typeorm";
import type { PostgresQueryRunner } from "typeorm/driver/postgres/PostgresQueryRunner.js";
import { withArrayLiterals } from "./array-literal.js";
import { poolOf } from "./pool.js";

const names = new Map<string, string>();

/**
 * Data sources whose connections are real PostgreSQL sessions. The embedded database serves every
 * connection from one shared session, where a name prepared by one connection would clash with the
 * same name prepared by the next, so it runs statements unnamed.
 */
const sessionPerConnection = new WeakSet<DataSource>();

/** Marks a data source as real PostgreSQL, where named statements are per connection. */
export function useNamedStatements(dataSource: DataSource): void {
  sessionPerConnection.add(dataSource);
}

/** A stable name per statement text, so each pooled connection parses and plans it only once. */
function nameOf(text: string): string {
  let name = names.get(text);
  if (name === undefined) {
    name = `s_${createHash("sha1").update(text).digest("hex").slice(0, 20)}`;
    names.set(text, name);
  }
  return name;
}

/**
 * Runs one statement outside any transaction as a named prepared statement. For the per-request hot
 * path (key lookup, payment insert, claims), where re-parsing and re-planning every time costs
 * PostgreSQL more CPU than executing.
 */
export function preparedQuery<Row extends pg.QueryResultRow>(dataSource: DataSource, text: string, values: unknown[]): Promise<Row[]> {
  return preparedOn<Row>(poolOf(dataSource), sessionPerConnection.has(dataSource), text, values);
}

/**
 * Runs one statement on `connections`, prepared once per connection under a name of its text when
 * `named` (real PostgreSQL sessions): for the code that holds a pg pool or client rather than a data
 * source, such as the webhook delivery thread, whose look for due deliveries runs ten times a second.
 */
export async function preparedOn<Row extends pg.QueryResultRow>(
  connections: pg.Pool | pg.PoolClient,
  named: boolean,
  text: string,
  values: unknown[],
): Promise<Row[]> {
  const result = await connections.query<Row>({ name: named ? nameOf(text) : undefined, text, values: withArrayLiterals(values) });
  return result.rows;
}

/**
 * Runs one statement as `preparedQuery` does, in `em`'s transaction when it has one (else alone): for
 * the statements that write an object's change, which run in an API call's transaction only when its
 * response is stored with it.
 */
export async function preparedIn<Row extends pg.QueryResultRow>(em: EntityManager, text: string, values: unknown[]): Promise<Row[]> {
  if (em.queryRunner === undefined) return preparedQuery<Row>(em.connection, text, values);
  const client = (await (em.queryRunner as PostgresQueryRunner).connect()) as pg.PoolClient;
  return preparedOn<Row>(client, sessionPerConnection.has(em.connection), text, values);
}
