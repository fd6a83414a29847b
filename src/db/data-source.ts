import "reflect-metadata";
import { DataSource } from "typeorm";
import { entities } from "./entities.js";
import { migrations } from "./migrations/index.js";

/**
 * Connects to PostgreSQL and brings the schema up to date. Migrations run inside one transaction
 * and under TypeORM's migration lock, so several instances starting together apply each once.
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
    logging: ["error"],
    extra: { max: poolSize },
  });
  await dataSource.initialize();
  await dataSource.runMigrations();
  return dataSource;
}
