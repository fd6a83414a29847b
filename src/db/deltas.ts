import type { EntityManager } from "typeorm";

/*
 * Tables of signed deltas (`list_counts`, `balance_totals`): writers append a row per key rather than
 * update one, so concurrent writes of one merchant never queue behind each other's row lock, and a
 * reader sums a key's rows. A merge folds each key's rows into one so the sums stay short.
 */

/**
 * Merges, in `em`'s transaction, every key of `table` that has more than one row into one row of
 * their sums, and returns how many rows were taken. A key whose sums come to zero is dropped when
 * `dropZero` names the column that says so (a count), kept otherwise.
 */
export async function mergeDeltas(
  em: EntityManager,
  table: string,
  keyColumns: readonly string[],
  sumColumns: readonly string[],
  dropZero?: string,
): Promise<number> {
  const keys = keyColumns.join(", ");
  const sameKey = keyColumns.map((column) => `t.${column} = g.${column}`).join(" AND ");
  const sums = sumColumns.map((column) => `sum(${column})`).join(", ");
  const [{ rows }] = (await em.query(
    `WITH taken AS (
       DELETE FROM ${table} AS t USING (SELECT ${keys} FROM ${table} GROUP BY ${keys} HAVING count(*) > 1) AS g
        WHERE ${sameKey}
       RETURNING t.*
     ), summed AS (
       INSERT INTO ${table} (${keys}, ${sumColumns.join(", ")})
       SELECT ${keys}, ${sums} FROM taken GROUP BY ${keys}${dropZero === undefined ? "" : ` HAVING sum(${dropZero}) <> 0`}
     )
     SELECT count(*)::int AS rows FROM taken`,
  )) as [{ rows: number }];
  return rows;
}
