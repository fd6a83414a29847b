import type { DataSource, EntityManager } from "typeorm";

/*
 * The planner chooses each plan from the statistics ANALYZE last took of a table. A table analyzed
 * while it was empty, or never, looks tiny: a merchant's page of payments is then read by fetching
 * and sorting every one of the merchant's rows rather than by walking `payments_list`, and a named
 * statement's generic plan scans the table it thinks small. Autovacuum analyzes a table once a
 * tenth of it changed, but only where it is on, and a minute or more behind a table that grows by
 * thousands of rows a second or was bulk-loaded. So the service checks for itself, with
 * autovacuum's own thresholds, and analyzes the tables that passed them: no more often than
 * autovacuum's naptime, unless a table doubled.
 */

/** How often each instance looks for stale statistics: a look is one read of PostgreSQL's table counters. */
export const statisticsCheckIntervalMs = 5_000;

/** Rows a table must change by, beyond its scale share, before it is analyzed again: autovacuum's default. */
const changedRows = 50;

/** Share of a table that must change before it is analyzed again: autovacuum's default. */
const changedShare = 0.1;

/**
 * How long after its last analysis a table that grew by less than it had (by a tenth, say) waits
 * before the next: autovacuum's own naptime. An ANALYZE samples up to 30,000 rows whatever the size
 * of the table (100–350 ms), and a table fed thousands of rows a second passes a tenth every few
 * seconds; what a plan turns on is the table's order of magnitude, and a table that has doubled, or
 * was never analyzed, is analyzed at the next look.
 */
const reanalysisPauseSeconds = 60;

/**
 * Identifies the transaction lock of one table's analysis ("stat" in ASCII), so that instances that
 * see the same stale table at once analyze it once.
 */
const analysisLockClass = 0x73746174;

/**
 * Which of `tables` changed by more rows than autovacuum waits for since their last analysis, and
 * either doubled since or were last analyzed more than `reanalysisPauseSeconds` ago.
 */
async function staleTables(em: EntityManager, tables: readonly string[]): Promise<string[]> {
  const rows = (await em.query(
    `SELECT s.relname AS name FROM pg_stat_user_tables AS s JOIN pg_class AS c ON c.oid = s.relid
      WHERE s.schemaname = current_schema() AND s.relname = ANY($1)
        AND s.n_mod_since_analyze > $2 + $3 * greatest(c.reltuples, 0)
        AND (s.n_mod_since_analyze > $2 + greatest(c.reltuples, 0)
             OR coalesce(greatest(s.last_analyze, s.last_autoanalyze) < now() - make_interval(secs => $4), true))
      ORDER BY s.relname`,
    [tables, changedRows, changedShare, reanalysisPauseSeconds],
  )) as { name: string }[];
  return rows.map((row) => row.name);
}

/**
 * Analyzes each of the service's tables that changed by more rows than autovacuum waits for (50 and
 * a tenth of the table) since its last analysis, at most once a minute unless it doubled, and
 * returns their names. An ANALYZE reads a sample, takes no lock that blocks reads or writes, and
 * makes PostgreSQL plan every cached statement on the table again on every connection.
 */
export async function refreshStatistics(dataSource: DataSource): Promise<string[]> {
  const tables = dataSource.entityMetadatas.map((metadata) => metadata.tableName);
  const analyzed: string[] = [];
  for (const name of await staleTables(dataSource.manager, tables)) {
    const ran = await dataSource.transaction(async (em) => {
      const [{ mine }] = (await em.query("SELECT pg_try_advisory_xact_lock($1, hashtext($2)) AS mine", [analysisLockClass, name])) as [
        { mine: boolean },
      ];
      // Another instance may have analyzed it between the look and the lock.
      if (!mine || (await staleTables(em, [name])).length === 0) return false;
      await em.query(`ANALYZE "${name.replace(/"/g, '""')}"`);
      return true;
    });
    if (ran) analyzed.push(name);
  }
  return analyzed;
}
