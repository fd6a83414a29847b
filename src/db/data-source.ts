import "reflect-metadata";
import { DataSource, MigrationExecutor, type MigrationInterface } from "typeorm";
import { connectionOptions, type DatabaseTimeouts, poolOptions } from "./pool.js";

/** A migration as TypeORM takes it: a class. */
export type Migration = new () => MigrationInterface;

/**
 * What the data source maps and how the schema gets there, given by the composition root
 * (src/entities.ts, src/migrations/): db/ knows no resource.
 */
export interface Schema {
  // biome-ignore lint/complexity/noBannedTypes: TypeORM's own type for an entity class.
  readonly entities: readonly Function[];
  readonly migrations: readonly Migration[];
}

/** Advisory lock key held while migrating ("payments" in ASCII), so instances starting together migrate once. */
const migrationLock = 0x7061796d656e7473n;

/**
 * Brings the schema up to date and returns the names of the migrations it applied, on connections of
 * their own: a migration may rewrite a large table for longer than any API statement may run, and may
 * wait for the lock of another process migrating, so these connections carry only the connect
 * timeout. Migrations run in one transaction while this process holds an advisory lock, so instances
 * (or a deploy job) starting together apply each one once.
 */
export async function applyMigrations(url: string, connectTimeoutMs: number, migrations: readonly Migration[]): Promise<string[]> {
  const dataSource = new DataSource({
    type: "postgres",
    url: connectionOptions(url).connectionString,
    migrations: [...migrations],
    migrationsTransactionMode: "all",
    logging: false,
    // One connection holds the lock, the other migrates.
    extra: { ...connectionOptions(url), max: 2, connectionTimeoutMillis: connectTimeoutMs },
  });
  await dataSource.initialize();
  try {
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
  } finally {
    await dataSource.destroy();
  }
}

/**
 * Throws, naming what is missing and how to apply it, unless every migration this release knows is
 * applied: with MIGRATE_ON_START=false an instance must not serve on a schema it was not written for.
 */
async function expectMigrated(dataSource: DataSource): Promise<void> {
  const pending = (await new MigrationExecutor(dataSource).getPendingMigrations()).map((migration) => migration.name);
  if (pending.length > 0) {
    throw new Error(
      `MIGRATE_ON_START is false and the database lacks ${pending.length} migration(s) this release needs (${pending.join(", ")}): ` +
        "run `npm run migrate` (in the image: node dist/src/cli/migrate.js) against this DATABASE_URL first, or set MIGRATE_ON_START=true",
    );
  }
}

/**
 * Connects to PostgreSQL with the pool every API call and job uses: `poolSize` connections whose
 * every wait is bounded by `timeouts` (pool.ts). With `migrateOnStart` it first brings the schema up
 * to date; without, it refuses a database that lacks a migration (a deploy job applies them).
 */
export async function openDataSource(
  url: string,
  poolSize: number,
  timeouts: DatabaseTimeouts,
  migrateOnStart: boolean,
  schema: Schema,
): Promise<DataSource> {
  if (migrateOnStart) await applyMigrations(url, timeouts.connectTimeoutMs, schema.migrations);
  const dataSource = new DataSource({
    type: "postgres",
    url: connectionOptions(url).connectionString,
    entities: [...schema.entities],
    migrations: [...schema.migrations],
    migrationsRun: false,
    synchronize: false,
    // Failed queries are logged by the outcome interceptor without parameters, which hold personal data.
    logging: false,
    extra: poolOptions(url, timeouts, poolSize),
  });
  await dataSource.initialize();
  if (!migrateOnStart) {
    try {
      await expectMigrated(dataSource);
    } catch (error) {
      await dataSource.destroy();
      throw error;
    }
  }
  return dataSource;
}
