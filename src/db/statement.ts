import type { EntityMetadata } from "typeorm";
import type { ColumnMetadata } from "typeorm/metadata/ColumnMetadata.js";

/**
 * The type a column's parameter is cast to: the column's type without its length, since an explicit
 * cast to `varchar(n)` or `char(n)` cuts a longer value short without a word; the value's assignment
 * to the column then rejects it instead. A bare `char` would mean `char(1)`, so it is `bpchar`.
 */
function sqlType(column: ColumnMetadata): string {
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

/**
 * One SQL statement made of data-modifying CTEs: a change, its event and its jobs reach PostgreSQL in
 * a single round trip and commit atomically even outside an explicit transaction. Rows are written
 * from the entities' own metadata, so a new column can never be forgotten here.
 */
export class Statement {
  readonly params: unknown[] = [];
  private readonly parts: string[] = [];

  /** A bound parameter cast to `type`, so values inside INSERT … SELECT keep their column types. */
  param(value: unknown, type: string): string {
    this.params.push(value);
    return `$${this.params.length}::${type}`;
  }

  /** The SELECT list of an entity's row: every column's value as a typed parameter. */
  private rowOf(metadata: EntityMetadata, entity: object): { columns: string; values: string } {
    const { columns, names, types } = insertShapeOf(metadata);
    return { columns: names, values: columns.map((c, i) => this.param(columnValue(c, entity), types[i]!)).join(", ") };
  }

  /**
   * Adds `name AS (INSERT … SELECT … FROM after RETURNING returning)`: the row is written only if the
   * CTE `after` wrote one; a later CTE may read the `returning` columns of what it wrote.
   */
  insert(name: string, metadata: EntityMetadata, entity: object, after: string, returning = "1"): this {
    const { columns, values } = this.rowOf(metadata, entity);
    this.parts.push(`${name} AS (INSERT INTO "${metadata.tableName}" (${columns}) SELECT ${values} FROM ${after} RETURNING ${returning})`);
    return this;
  }

  /**
   * Adds `name AS (UPDATE … SET every non-key column WHERE key columns RETURNING 1)`; with `claimToken`,
   * only while that claim still holds the row (src/db/claims.ts).
   */
  update(name: string, metadata: EntityMetadata, entity: object, claimToken?: string): this {
    const set = metadata.columns
      .filter((c) => !c.isPrimary)
      .map((c) => `"${c.databaseName}" = ${this.param(columnValue(c, entity), sqlType(c))}`);
    const where = metadata.primaryColumns.map((c) => `"${c.databaseName}" = ${this.param(c.getEntityValue(entity, true), sqlType(c))}`);
    if (claimToken !== undefined) where.push(`claim_token = ${this.param(claimToken, "varchar")}`);
    this.parts.push(`${name} AS (UPDATE "${metadata.tableName}" SET ${set.join(", ")} WHERE ${where.join(" AND ")} RETURNING 1)`);
    return this;
  }

  /** Adds a raw data-modifying CTE (e.g. a DELETE) whose parameters come from `param`. */
  raw(name: string, sql: string): this {
    this.parts.push(`${name} AS (${sql})`);
    return this;
  }

  /** The statement; it returns how many rows the CTE `counted` wrote, as `n`. */
  sql(counted: string): string {
    return `WITH ${this.parts.join(",\n")}\nSELECT (SELECT count(*) FROM ${counted})::int AS n`;
  }
}
