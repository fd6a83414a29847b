import type { EntityManager, EntityMetadata, EntityTarget, ObjectLiteral } from "typeorm";
import type { ValueTransformer } from "typeorm";

function fromDatabase(transformer: ValueTransformer | ValueTransformer[] | undefined, value: unknown): unknown {
  if (transformer === undefined || value === null) return value;
  return (Array.isArray(transformer) ? [...transformer].reverse() : [transformer]).reduce((v, t) => t.from(v), value);
}

/** `SELECT * … WHERE` the key columns (`FOR UPDATE` when `locking`), and the key's values in order: built from the entity's metadata. */
function keyedSelect<Row extends ObjectLiteral>(
  metadata: EntityMetadata,
  key: Partial<Row>,
  locking: boolean,
): { text: string; values: unknown[] } {
  const keyColumns = Object.keys(key).map((property) => {
    const column = metadata.findColumnWithPropertyName(property);
    if (column === undefined) throw new Error(`${metadata.name} has no column ${property}`);
    return column;
  });
  const where = keyColumns.map((column, i) => `"${column.databaseName}" = $${i + 1}`).join(" AND ");
  return {
    text: `SELECT * FROM "${metadata.tableName}" WHERE ${where}${locking ? " FOR UPDATE" : ""}`,
    values: keyColumns.map((column) => column.getEntityValue(key, true)),
  };
}

/**
 * Reads one row by its key and locks it (`SELECT … FOR UPDATE`) in the caller's transaction. A plain
 * statement mapped through the entity's metadata: the same result as a locking findOne, without the
 * query builder's cost on every state change.
 */
export async function lockRow<Row extends ObjectLiteral>(
  em: EntityManager,
  entity: EntityTarget<Row>,
  key: Partial<Row>,
): Promise<Row | null> {
  const metadata = em.connection.getMetadata(entity);
  const { text, values } = keyedSelect(metadata, key, true);
  const raw = ((await em.query(text, values)) as Record<string, unknown>[])[0];
  return raw === undefined ? null : rowFromDatabase(metadata, raw);
}

/**
 * Reads one row by its key: a retrieve is on the hot path of every client that polls, where the query
 * builder of a findOne costs more than the read. Not a named statement: PostgreSQL plans it with the
 * key's values each time, since a generic plan made while the table was empty can scan a merchant's
 * rows through another index that holds the key's columns (1 ms a retrieve in the mix, against 0.05).
 */
export async function readRow<Row extends ObjectLiteral>(
  em: EntityManager,
  entity: EntityTarget<Row>,
  key: Partial<Row>,
): Promise<Row | null> {
  const metadata = em.connection.getMetadata(entity);
  const { text, values } = keyedSelect(metadata, key, false);
  const raw = ((await em.query(text, values)) as Record<string, unknown>[])[0];
  return raw === undefined ? null : rowFromDatabase(metadata, raw);
}

/** An entity from a row a hand-written statement returned (`RETURNING *`, `SELECT *`), through its columns' transformers. */
export function rowFromDatabase<Row extends ObjectLiteral>(metadata: EntityMetadata, raw: Record<string, unknown>): Row {
  const row = metadata.create() as Row;
  for (const column of metadata.columns) {
    column.setEntityValue(row, fromDatabase(column.transformer, raw[column.databaseName]));
  }
  return row;
}
