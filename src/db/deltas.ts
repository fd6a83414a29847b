import type { EntityManager } from "typeorm";

/*
 * Tables of signed deltas (`list_counts`, `balance_totals`): writers append a row per key rather than
 * update one, so concurrent writes of one merchant never queue behind each other's row lock, and a
 * reader sums a key's rows. A merge adds the deltas (`merged` false, the column's default, in a
 * partial index of their own) to their key's one merged row (`merged` true, unique per key), so the
 * sums stay short and a merge costs what was written since the last, whatever the table holds
 * (migration 1766400000000).
 */

/** Coarser sums a merge keeps beside the table's own, in the same statement: a table keyed by some of its key's columns. */
export interface Rollup {
  readonly table: string;
  readonly keyColumns: readonly string[];
  readonly sumColumns: readonly string[];
}

/**
 * `INSERT … SELECT` of `taken`'s sums into `table` by `keyColumns`, adding to the row a key already
 * has; `asMerged` writes the table's own merged rows, whose key is unique among merged rows only.
 */
function addedInto(table: string, keyColumns: readonly string[], sumColumns: readonly string[], asMerged: boolean): string {
  const keys = keyColumns.join(", ");
  const sums = sumColumns.map((column) => `sum(${column})`).join(", ");
  const added = sumColumns.map((column) => `${column} = ${table}.${column} + excluded.${column}`).join(", ");
  return asMerged
    ? `INSERT INTO ${table} (${keys}, ${sumColumns.join(", ")}, merged) SELECT ${keys}, ${sums}, true FROM taken GROUP BY ${keys} ` +
        `ON CONFLICT (${keys}) WHERE merged DO UPDATE SET ${added}`
    : `INSERT INTO ${table} (${keys}, ${sumColumns.join(", ")}) SELECT ${keys}, ${sums} FROM taken GROUP BY ${keys} ` +
        `ON CONFLICT (${keys}) DO UPDATE SET ${added}`;
}

/**
 * Merges, in `em`'s transaction, every delta of `table` into its key's merged row, and into
 * `rollup`'s row when given, and returns how many deltas were taken. A key's merged row stays when
 * its sums come to zero: keys are bounded (merchants × what they are counted by), and a balance
 * shows a currency that has transactions.
 */
export async function mergeDeltas(
  em: EntityManager,
  table: string,
  keyColumns: readonly string[],
  sumColumns: readonly string[],
  rollup?: Rollup,
): Promise<number> {
  const rolled = rollup === undefined ? "" : `, rolled AS (${addedInto(rollup.table, rollup.keyColumns, rollup.sumColumns, false)})`;
  const [{ rows }] = (await em.query(
    `WITH taken AS (DELETE FROM ${table} WHERE NOT merged RETURNING *),
     summed AS (${addedInto(table, keyColumns, sumColumns, true)})${rolled}
     SELECT count(*)::int AS rows FROM taken`,
  )) as [{ rows: number }];
  return rows;
}
