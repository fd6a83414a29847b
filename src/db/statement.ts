import type { EntityMetadata } from "typeorm";
import type { ColumnMetadata } from "typeorm/metadata/ColumnMetadata.js";

/**
 * The type a column's parameter is cast to: the column's type without its length, since an explicit
 * cast to `varchar(n)` or `char(n)` cuts a longer value short without a word; the value's assignment
 * to the column then rejects it instead. A bare `char` would mean `char(1)`, so it is `bpchar`.
 */
export function sqlType(column: ColumnMetadata): string {
  return column.type === "char" ? "bpchar" : String(column.type);
}

/**
 * A column's value as a parameter. JSON columns are sent as their JSON text: the driver would turn
 * a JavaScript array into a PostgreSQL array literal, which is not JSON.
 */
export function columnValue(column: ColumnMetadata, entity: object): unknown {
  const value: unknown = column.getEntityValue(entity, true) ?? null;
  return value !== null && (column.type === "jsonb" || column.type === "json") ? JSON.stringify(value) : value;
}

/** What an INSERT of an entity needs from its metadata, worked out once per entity (hot path). */
interface InsertShape {
  readonly columns: readonly ColumnMetadata[];
  readonly names: string;
  readonly types: readonly string[];
}

const insertShapes = new WeakMap<EntityMetadata, InsertShape>();

/** The columns an INSERT of the entity writes (all but generated ones), their quoted names and SQL types. */
export function insertShapeOf(metadata: EntityMetadata): InsertShape {
  let shape = insertShapes.get(metadata);
  if (shape === undefined) {
    const columns = metadata.columns.filter((c) => !c.isGenerated);
    shape = { columns, names: columns.map((c) => `"${c.databaseName}"`).join(", "), types: columns.map(sqlType) };
    insertShapes.set(metadata, shape);
  }
  return shape;
}

/** Each column's values over all the entities, one array per column in the order of `insertShapeOf`. */
export function arraysOf(metadata: EntityMetadata, entities: readonly object[]): unknown[][] {
  return insertShapeOf(metadata).columns.map((column) => entities.map((entity) => columnValue(column, entity)));
}

/**
 * `unnest($1::type[], …[, positions]) AS alias(columns, extra, position)`: one row per entity, each
 * column's values sent as one array (then the `extra` columns' arrays), with the position (from 1) in
 * the batch of the item the row belongs to, taken from the row's own place (`WITH ORDINALITY`) or
 * from one more array.
 */
export function unnestOf(
  metadata: EntityMetadata,
  alias: string,
  firstParam: number,
  positions: "ordinality" | "array",
  extra: readonly { readonly name: string; readonly type: string }[] = [],
): string {
  const { names, types } = insertShapeOf(metadata);
  const arrays = [...types, ...extra.map((column) => column.type)].map((type, i) => `$${firstParam + i}::${type}[]`);
  if (positions === "array") arrays.push(`$${firstParam + arrays.length}::bigint[]`);
  const columns = [names, ...extra.map((column) => column.name)].join(", ");
  return `unnest(${arrays.join(", ")})${positions === "ordinality" ? " WITH ORDINALITY" : ""} AS ${alias}(${columns}, position)`;
}

/** The entity's columns as `alias."column", …`, for a SELECT over a join. */
export function qualifiedNames(metadata: EntityMetadata, alias: string): string {
  return insertShapeOf(metadata)
    .columns.map((column) => `${alias}."${column.databaseName}"`)
    .join(", ");
}
