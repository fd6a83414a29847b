import type { DataSource, EntityTarget, ObjectLiteral, SelectQueryBuilder } from "typeorm";
import type { Page } from "../validation/list.js";

/**
 * Runs a list query the documented way (decisions §7): the creation window, newest first by the
 * `order` columns (the creation time, then the id so that pages never overlap; or one column that
 * already orders every row), one page, and the exact number of matches: counted by the query, or by
 * `kept`, the count of the resource's own filters as `list_counts` keeps it (src/db/list-counts.ts).
 * A kept count knows nothing of a creation window, so with one the query counts.
 */
export async function fetchPage<Row extends ObjectLiteral>(
  query: SelectQueryBuilder<Row>,
  order: readonly string[],
  page: Page,
  kept?: () => Promise<number>,
): Promise<[Row[], number]> {
  const alias = query.alias;
  if (page.createdGte) query.andWhere(`${alias}.created >= :createdGte`, { createdGte: page.createdGte });
  if (page.createdLte) query.andWhere(`${alias}.created <= :createdLte`, { createdLte: page.createdLte });
  for (const [i, column] of order.entries()) {
    if (i === 0) query.orderBy(`${alias}.${column}`, "DESC");
    else query.addOrderBy(`${alias}.${column}`, "DESC");
  }
  const paged = query.skip(page.offset).take(page.limit);
  if (kept === undefined || page.createdGte || page.createdLte) return paged.getManyAndCount();
  return Promise.all([paged.getMany(), kept()]);
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
