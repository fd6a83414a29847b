import "reflect-metadata";
import { DataSource } from "typeorm";
import { entities } from "./entities.js";
import { migrations } from "./migrations/index.js";
import { type DatabaseTimeouts, poolOptions } from "./pool.js";

/** Advisory lock key held while migrating ("payments" in ASCII), so instances starting together migrate once. */
const migrationLock = 0x7061796d656e7473n;

/**
 * Brings the schema up to date, on connections of their own: a migration may rewrite a large table
 * for longer than any API statement may run, and may wait for the lock of another instance
 * migrating, so these connections carry only the connect timeout. Migrations run in one
 * transaction while this instance holds an advisory lock, so several instances starting together
 * apply each one once.
 */
async function migrate(url: string, timeouts: DatabaseTimeouts): Promise<void> {
  const dataSource = new DataSource({
    type: "postgres",
    url,
    migrations,
    migrationsTransactionMode: "all",
    logging: false,
    // One connection holds the lock, the other migrates.
    extra: { max: 2, connectionTimeoutMillis: timeouts.connectTimeoutMs },
  });
  await dataSource.initialize();
  try {
    const lock = dataSource.createQueryRunner();
    try {
      await lock.connect();
      await lock.query("SELECT pg_advisory_lock($1)", [migrationLock.toString()]);
      await dataSource.runMigrations();
      await lock.query("SELECT pg_advisory_unlock($1)", [migrationLock.toString()]);
    } finally {
      await lock.release();
    }
  } finally {
    await dataSource.destroy();
  }
}

/**
 * Connects to PostgreSQL, after bringing the schema up to date, with the pool every API call and job
 * uses: `poolSize` connections whose every wait is bounded by `timeouts` (pool.ts).
 */
export async function openDataSource(url: string, poolSize: number, timeouts: DatabaseTimeouts): Promise<DataSource> {
  await migrate(url, timeouts);
  const dataSource = new DataSource({
    type: "postgres",
    url,
    entities,
    migrations,
    migrationsRun: false,
    synchronize: false,
    // Failed queries are logged by the outcome interceptor without parameters, which hold personal data.
    logging: false,
    extra: poolOptions(timeouts, poolSize),
  });
  await dataSource.initialize();
  return dataSource;
}
