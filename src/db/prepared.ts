import { createHash } from "node:crypto";
import type pg from "pg";
import type { DataSource, EntityManager } from "typeorm";
import type { PostgresQueryRunner } from "typeorm/driver/postgres/PostgresQueryRunner.js";
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
export async function preparedQuery<Row extends pg.QueryResultRow>(
  dataSource: DataSource,
  text: string,
  values: unknown[],
): Promise<Row[]> {
  const name = sessionPerConnection.has(dataSource) ? nameOf(text) : undefined;
  const result = await poolOf(dataSource).query<Row>({ name, text, values });
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
  const name = sessionPerConnection.has(em.connection) ? nameOf(text) : undefined;
  const result = await client.query<Row>({ name, text, values });
  return result.rows;
}
