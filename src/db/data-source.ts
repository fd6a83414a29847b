import "reflect-metadata";
import { DataSource, MigrationExecutor } from "typeorm";
import { entities } from "./entities.js";
import { migrations } from "./migrations/index.js";

/** Advisory lock key held while migrating ("payments" in ASCII), so instances starting together migrate once. */
const migrationLock = 0x7061796d656e7473n;

/** Connects to PostgreSQL, leaving the schema as it is: applyMigrations or expectMigrated decides. */
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
  return dataSource;
}

/**
 * Brings the schema up to date and returns the names of the migrations it applied. They run in one
 * transaction while this process holds an advisory lock, so instances (or a deploy job) starting
 * together apply each one once.
 */
export async function applyMigrations(dataSource: DataSource): Promise<string[]> {
  const lock = dataSource.createQueryRunner();
  try {
    await lock.connect();
    await lock.query("SELECT pg_advisory_lock($1)", [migrationLock.toString()]);
    const applied = await dataSource.runMigrations();
    await lock.query("SELECT pg_advisory_unlock($1)", [migrationLock.toString()]);
    return applied.map((migration) => migration.name);
  } finally {
    await lock.release();
  }
}

/**
 * Throws, naming what is missing and how to apply it, unless every migration this release knows is
 * applied: with MIGRATE_ON_START=false an instance must not serve on a schema it was not written for.
 */
export async function expectMigrated(dataSource: DataSource): Promise<void> {
  const pending = (await new MigrationExecutor(dataSource).getPendingMigrations()).map((migration) => migration.name);
  if (pending.length > 0) {
    throw new Error(
      `MIGRATE_ON_START is false and the database lacks ${pending.length} migration(s) this release needs (${pending.join(", ")}): ` +
        "run `npm run migrate` (in the image: node dist/src/db/migrate.js) against this DATABASE_URL first, or set MIGRATE_ON_START=true",
    );
  }
}
