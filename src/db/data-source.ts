import "reflect-metadata";
import { DataSource } from "typeorm";
import { entities } from "./entities.js";
import { migrations } from "./migrations/index.js";

/** Advisory lock key held while migrating ("payments" in ASCII), so instances starting together migrate once. */
const migrationLock = 0x7061796d656e7473n;

/**
 * Connects to PostgreSQL and brings the schema up to date. Migrations run in one transaction while
 * this instance holds an advisory lock, so several instances starting together apply each one once.
 */
export async function openDataSource(url: string, poolSize: number): Promise<DataSource> {
  const dataSource = new DataSource({
    type: "postgres",
    url,
    entities,
    migrations,
    migrationsRun: false,
    migrationsTransactionMode: "all",
    synchronize: false,
    // Failed queries are logged by the outcome interceptor without parameters, which hold personal data.
    logging: false,
    extra: { max: poolSize },
  });
  await dataSource.initialize();
  const lock = dataSource.createQueryRunner();
  try {
    await lock.connect();
    await lock.query("SELECT pg_advisory_lock($1)", [migrationLock.toString()]);
    await dataSource.runMigrations();
    await lock.query("SELECT pg_advisory_unlock($1)", [migrationLock.toString()]);
  } finally {
    await lock.release();
  }
  return dataSource;
}
