import type { EntityManager, EntityMetadata, EntityTarget, ObjectLiteral } from "typeorm";
import type { ValueTransformer } from "typeorm";
import type { ColumnMetadata } from "typeorm/metadata/ColumnMetadata.js";
import { preparedIn } from "./prepared.js";

function fromDatabase(transformer: ValueTransformer | ValueTransformer[] | undefined, value: unknown): unknown {
  if (transformer === undefined || value === null) return value;
  return (Array.isArray(transformer) ? [...transformer].reverse() : [transformer]).reduce((v, t) => t.from(v), value);
}

/**
 * Reads one row by its key and locks it until the caller's transaction ends: the same result as a
 * locking findOne, from a named statement built from the entity's metadata and mapped through it,
 * without the query builder's cost, planned once per connection (planning cost PostgreSQL more than
 * running it: 0.08 against 0.04 ms). Its generic plan is only as good as the table's statistics:
 * made while a table was empty and never analyzed, it could read a merchant's rows through another
 * index that holds the key's columns; the service's statistics check (src/db/statistics.ts) analyzes
 * a table within seconds of its first rows, which re-plans the statement on every connection. The
 * columns are named, not `*`, so that a column a later migration adds does not change the result of
 * a statement an older instance has prepared.
 */
export async function lockRow<Row extends ObjectLiteral>(
  em: EntityManager,
  entity: EntityTarget<Row>,
  key: Partial<Row>,
): Promise<Row | null> {
  const metadata = em.connection.getMetadata(entity);
  const keyColumns = Object.keys(key).map((property) => {
    const column = metadata.findColumnWithPropertyName(property);
    if (column === undefined) throw new Error(`${metadata.name} has no column ${property}`);
    return column;
  });
  const where = keyColumns.map((column, i) => `"${column.databaseName}" = $${i + 1}`).join(" AND ");
  const columns = metadata.columns.map((column) => `"${column.databaseName}"`).join(", ");
  const rows = await preparedIn<Record<string, unknown>>(
    em,
    `SELECT ${columns} FROM "${metadata.tableName}" WHERE ${where} FOR UPDATE`,
    keyColumns.map((column) => column.getEntityValue(key, true)),
  );
  const raw = rows[0];
  return raw === undefined ? null : rowFromDatabase(metadata, raw);
}

/**
 * An entity from a row a hand-written statement returned (`RETURNING *`, `SELECT *`), through its
 * columns' transformers; `selectedAs` names each column in the row when the statement aliased them.
 */
export function rowFromDatabase<Row extends ObjectLiteral>(
  metadata: EntityMetadata,
  raw: Record<string, unknown>,
  selectedAs: (column: ColumnMetadata) => string = (column) => column.databaseName,
): Row {
  const row = metadata.create() as Row;
  for (const column of metadata.columns) {
    column.setEntityValue(row, fromDatabase(column.transformer, raw[selectedAs(column)]));
  }
  return row;
}
