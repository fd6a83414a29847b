import pg from "pg";
import type { DataSource } from "typeorm";
import type { PostgresDriver } from "typeorm/driver/postgres/PostgresDriver.js";

/** How long anything of an instance may wait on PostgreSQL (DATABASE_*_TIMEOUT_MS in config.ts). */
export interface DatabaseTimeouts {
  /** A connection: a free one of the pool, or a new one being opened (pg-pool has one setting for both). */
  readonly connectTimeoutMs: number;
  readonly statementTimeoutMs: number;
  readonly lockTimeoutMs: number;
  readonly idleInTransactionTimeoutMs: number;
}

/**
 * How long past statement_timeout the instance still waits for an answer. PostgreSQL cancels a slow
 * statement itself and the connection stays usable; only a server that cannot answer at all (frozen,
 * cut off by the network) reaches this deadline, and its connection is closed.
 */
const answerMarginMs = 2000;

const readTimeoutMessage = "Query read timeout";

/** A pg callback: the error first. */
type Callback = (error: Error | undefined, ...rest: unknown[]) => void;

/**
 * A pg client that closes its connection when an answer does not come in time. pg's own read timeout
 * fails the query but leaves it running on the connection, so the next statement on it (a
 * transaction's ROLLBACK) queues behind a server that may never answer and waits the whole timeout
 * again; closed, the connection fails it at once and the pool replaces it.
 */
class AbandoningClient extends pg.Client {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    const query = this.query.bind(this) as (...args: unknown[]) => unknown;
    const abandon = (error: unknown): void => {
      if (error instanceof Error && error.message === readTimeoutMessage) this.connection.stream.destroy();
    };
    this.query = ((...args: unknown[]) => {
      const callback = args.at(-1);
      if (typeof callback === "function") {
        args[args.length - 1] = (error: Error | undefined, ...rest: unknown[]) => {
          (callback as Callback)(error, ...rest);
          abandon(error);
        };
        return query(...args);
      }
      const result = query(...args);
      if (result instanceof Promise) result.catch(abandon);
      return result;
    }) as pg.Client["query"];
  }
}

/**
 * The pg pool options of an instance's pools: `max` connections, a deadline on getting one, PostgreSQL's
 * own statement, lock and idle-in-transaction timeouts set on every session, and a deadline on every
 * answer slightly past statement_timeout, so that no call waits on PostgreSQL without end, whether it
 * is slow, restarting, gone or frozen.
 */
export function poolOptions(timeouts: DatabaseTimeouts, max: number): Record<string, unknown> {
  return {
    max,
    Client: AbandoningClient,
    connectionTimeoutMillis: timeouts.connectTimeoutMs,
    statement_timeout: timeouts.statementTimeoutMs,
    lock_timeout: timeouts.lockTimeoutMs,
    idle_in_transaction_session_timeout: timeouts.idleInTransactionTimeoutMs,
    query_timeout: timeouts.statementTimeoutMs + answerMarginMs,
    keepAlive: true,
  };
}

/**
 * The pg pool under a data source: for statements that need no entity and no transaction of TypeORM's.
 * The one place that reaches into TypeORM's driver for it. Once the data source is destroyed there is
 * none, and a statement sent then fails with that said rather than with a TypeError.
 */
export function poolOf(dataSource: DataSource): pg.Pool {
  const pool = (dataSource.driver as PostgresDriver).master as pg.Pool | undefined;
  if (pool === undefined) throw new Error("the database's connection pool is closed");
  return pool;
}

/** How many calls are waiting for a connection of the data source's pool now. */
export function waitingForConnections(dataSource: DataSource): number {
  return poolOf(dataSource).waitingCount;
}
