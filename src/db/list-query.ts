import type { DataSource, EntityTarget, ObjectLiteral, SelectQueryBuilder } from "typeorm";
import { DriverUtils } from "typeorm/driver/DriverUtils.js";
import type { ColumnMetadata } from "typeorm/metadata/ColumnMetadata.js";
import { rowFromDatabase } from "./lock.js";
import { type KeptCount, keptCountQuery } from "./list-counts.js";
import { preparedQuery } from "./prepared.js";

/** The list parameters every list endpoint shares (decisions §7), as validation/list.ts reads them from a request. */
export interface Page {
  readonly limit: number;
  readonly offset: number;
  readonly createdGte: Date | undefined;
  readonly createdLte: Date | undefined;
}

/**
 * Runs a list query the documented way (decisions §7): the creation window, newest first by the
 * `order` columns (the creation time, then the id so that pages never overlap; or one column that
 * already orders every row), one page, and the exact number of matches: counted by the query, or
 * read from `kept`, the count of the resource's own filters as `list_counts` keeps it
 * (src/db/list-counts.ts). A kept count knows nothing of a creation window, so with one the query
 * counts.
 *
 * The page and its count are one statement, so they come from one snapshot: an object committed
 * between two statements could be counted and missing from the page (a poll that waits for a
 * count, then reads the page, found none). It is a named statement (src/db/prepared.ts) with the
 * limit and offset as parameters, so every page of one combination of filters is planned once per
 * connection: the query builder writes them into its text.
 */
export async function fetchPage<Row extends ObjectLiteral>(
  query: SelectQueryBuilder<Row>,
  order: readonly string[],
  page: Page,
  kept?: KeptCount,
): Promise<[Row[], number]> {
  const alias = query.alias;
  const windowed = page.createdGte !== undefined || page.createdLte !== undefined;
  if (page.createdGte) query.andWhere(`${alias}.created >= :createdGte`, { createdGte: page.createdGte });
  if (page.createdLte) query.andWhere(`${alias}.created <= :createdLte`, { createdLte: page.createdLte });
  const [counting, values] = query.clone().select("count(*)", "total").getQueryAndParameters();
  for (const [i, column] of order.entries()) {
    if (i === 0) query.orderBy(`${alias}.${column}`, "DESC");
    else query.addOrderBy(`${alias}.${column}`, "DESC");
  }
  const [paging, pageValues] = query.getQueryAndParameters();
  if (pageValues.length !== values.length || pageValues.some((value, i) => value !== values[i])) {
    throw new Error(`${query.expressionMap.mainAlias!.metadata.name} list: the page and its count number their parameters apart`);
  }
  const count = kept === undefined || windowed ? { text: counting, values: [] } : keptCountQuery(kept, values.length + 1);
  const limit = values.length + count.values.length + 1;
  const raws = await preparedQuery<Record<string, unknown>>(
    query.connection,
    `SELECT counted.total::text AS counted_total, page.* FROM (${count.text}) AS counted
      LEFT JOIN LATERAL (${paging} LIMIT $${limit} OFFSET $${limit + 1}) AS page ON true`,
    [...values, ...count.values, page.limit, page.offset],
  );
  const metadata = query.expressionMap.mainAlias!.metadata;
  // Each column's name in the page's rows, worked out once per call rather than once per row.
  const names = new Map(
    metadata.columns.map((column) => [column, DriverUtils.buildAlias(query.connection.driver, undefined, alias, column.databaseName)]),
  );
  const selectedAs = (column: ColumnMetadata) => names.get(column)!;
  const primary = selectedAs(metadata.primaryColumns[0]!);
  // With no row on the page the count still answers, in one row whose page columns are all null.
  const rows = raws.filter((raw) => raw[primary] !== null).map((raw) => rowFromDatabase<Row>(metadata, raw, selectedAs));
  return [rows, Number(raws[0]!.counted_total)];
}

/** A list query over one merchant's objects of one environment, the partition every list starts from. */
export function scopedQuery<Row extends ObjectLiteral>(
  dataSource: DataSource,
  entity: EntityTarget<Row>,
  alias: string,
  scope: { merchantId: string; livemode: boolean },
): SelectQueryBuilder<Row> {
  return dataSource
    .getRepository(entity)
    .createQueryBuilder(alias)
    .where(`${alias}.merchant_id = :merchantId AND ${alias}.livemode = :livemode`, {
      merchantId: scope.merchantId,
      livemode: scope.livemode,
    });
}
