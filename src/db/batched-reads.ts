import type { DataSource, EntityManager, EntityMetadata, EntityTarget, ObjectLiteral } from "typeorm";
import { StatementBatches } from "./batches.js";
import { rowFromDatabase } from "./lock.js";
import { preparedIn, preparedQuery } from "./prepared.js";
import type { Scope } from "./scope.js";

/** One read: the row of `id` in a merchant's environment, as it stands at `at` when the lookup asks. */
interface KeyRead extends Scope {
  readonly id: string;
  readonly at: Date | null;
}

/**
 * Reads of one row each, by merchant, environment and id, that calls make at about the same time go
 * to PostgreSQL as one statement (src/db/batches.ts): a statement costs the database a wake-up and
 * this instance a round trip whatever its rows, and these reads come in bursts (the jobs of one claim
 * each read their payment in the same turn of the event loop). Each key's row of `table` (alias `t`)
 * is selected by a lateral subquery on its key columns, so each key is read by its own index
 * condition whatever the batch's size and no plan, custom or generic, turns the batch into a scan of
 * the table; `columns`, the select list, may use `k.at`, the time the read is made for when given.
 */
export class BatchedReads<Row extends object> {
  private readonly text: string;
  private readonly batches = new WeakMap<DataSource, StatementBatches<KeyRead, Row | undefined>>();

  constructor(table: string, idColumn: string, columns: string) {
    this.text =
      "SELECT k.position, r.* FROM unnest($1::varchar[], $2::boolean[], $3::varchar[], $4::timestamptz[]) WITH ORDINALITY " +
      `AS k(merchant_id, livemode, id, at, position) CROSS JOIN LATERAL (SELECT ${columns} FROM "${table}" AS t ` +
      `WHERE t.merchant_id = k.merchant_id AND t.livemode = k.livemode AND t."${idColumn}" = k.id) AS r`;
  }

  /**
   * The row of `id` in `scope` as `columns` select it (at `at`), undefined when there is none. Inside
   * `em`'s transaction when it has one (what it reads must be what that transaction sees), else
   * batched with other calls' reads.
   */
  read(em: EntityManager, scope: Scope, id: string, at?: Date): Promise<Row | undefined> {
    const key: KeyRead = { merchantId: scope.merchantId, livemode: scope.livemode, id, at: at ?? null };
    if (em.queryRunner !== undefined) return this.readAll((text, params) => preparedIn(em, text, params), [key]).then(([row]) => row);
    return this.batchesOf(em.connection).add(key);
  }

  private batchesOf(dataSource: DataSource): StatementBatches<KeyRead, Row | undefined> {
    let batches = this.batches.get(dataSource);
    if (batches === undefined) {
      batches = new StatementBatches((batch) => this.readAll((text, params) => preparedQuery(dataSource, text, params), batch));
      this.batches.set(dataSource, batches);
    }
    return batches;
  }

  private async readAll(
    query: (text: string, params: unknown[]) => Promise<Record<string, unknown>[]>,
    keys: readonly KeyRead[],
  ): Promise<(Row | undefined)[]> {
    const rows = await query(this.text, [
      keys.map((k) => k.merchantId),
      keys.map((k) => k.livemode),
      keys.map((k) => k.id),
      keys.map((k) => k.at),
    ]);
    const byPosition = new Map(rows.map(({ position, ...row }) => [Number(position), row as Row]));
    return keys.map((_, i) => byPosition.get(i + 1));
  }
}

/** Each entity's reads by key and the metadata they map with, made on first use. */
const readsByEntity = new WeakMap<object, { reads: BatchedReads<Record<string, unknown>>; metadata: EntityMetadata }>();

/**
 * The entity of `id` (its `idProperty`) in `scope`, undefined when there is none: read without a
 * lock and batched with other calls' reads of the same entity (BatchedReads). The columns are
 * named, not `*`, so that a column a later migration adds does not change the result of a statement
 * an older instance has prepared.
 */
export async function findByKey<Row extends ObjectLiteral>(
  em: EntityManager,
  entity: EntityTarget<Row>,
  idProperty: keyof Row & string,
  scope: Scope,
  id: string,
): Promise<Row | undefined> {
  let byKey = readsByEntity.get(entity as object);
  if (byKey === undefined) {
    const metadata = em.connection.getMetadata(entity);
    const idColumn = metadata.findColumnWithPropertyName(idProperty)!.databaseName;
    const columns = metadata.columns.map((column) => `t."${column.databaseName}"`).join(", ");
    byKey = { reads: new BatchedReads(metadata.tableName, idColumn, columns), metadata };
    readsByEntity.set(entity as object, byKey);
  }
  const raw = await byKey.reads.read(em, scope, id);
  return raw === undefined ? undefined : rowFromDatabase<Row>(byKey.metadata, raw);
}
