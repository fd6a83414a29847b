import pg from "pg";
import type { DataSource } from "typeorm";
import type { PostgresDriver } from "typeorm/driver/postgres/PostgresDriver.js";
import type { DatabaseHost } from "./address.js";
import { type Abandonable, PrimaryLocator } from "./primary.js";

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
export const answerMarginMs = 2000;

/**
 * How long a pool keeps a connection no call has used (pg-pool's default is 10 s). Closed 10 s after a
 * burst, the connections were opened again at the next one, each with every statement prepared anew
 * on a backend that maps shared buffers afresh: a cluster of slow reads 10 s after every burst on the
 * grown database (docs/performance.md). Ten minutes, as PgBouncer's server_idle_timeout, still gives
 * back what a quiet instance does not use.
 */
const idleConnectionMs = 600_000;

const readTimeoutMessage = "Query read timeout";

/** A pg callback: the error first. */
type Callback = (error: Error | undefined, ...rest: unknown[]) => void;

/** pg's callback of `connect`. */
type ConnectCallback = ((error: Error) => void) | ((error: null, client: pg.Client) => void);

/** SQLSTATEs of a server shutting down, crashed or starting up: the primary may have moved. */
const shuttingDownStates = new Set(["57P01", "57P02", "57P03"]);

/**
 * A commit PostgreSQL made on its own disk but whose wait for its synchronous standby was cancelled
 * (pg_cancel_backend, as an operator or a tool does when the standby is lost; statement_timeout does
 * not end that wait, the read timeout does): the server reports it as a success with a WARNING, yet
 * it may not survive a failover, since the standby that would be promoted may never have had it.
 * The service cannot tell the caller it succeeded, nor that it failed: 08007 is SQLSTATE's
 * "transaction resolution unknown", which answers 503 SU_01, and a retry with the idempotency key
 * finds the committed answer if it survived, and makes the change anew if it did not.
 */
export class UnconfirmedCommitError extends Error {
  readonly code = "08007";
  override readonly name = "UnconfirmedCommitError";
}

/**
 * Whether a notice is the server's warning that a cancel stopped its wait for synchronous
 * replication of a commit. The warning has no SQLSTATE of its own (01000), so its text tells, as
 * the server writes it with lc_messages in English, as packaged. (When a shutdown stops the wait
 * instead, the server ends the session without a word, which fails the statement anyway.)
 */
function isUnreplicatedCommit(notice: { readonly severity?: string; readonly message?: string }): boolean {
  return notice.severity === "WARNING" && (notice.message ?? "").includes("synchronous replication");
}

/** pg's options for a DatabaseClient, with the locator of its DATABASE_URL. */
export interface DatabaseClientConfig extends pg.ClientConfig {
  readonly locator: PrimaryLocator;
}

/** How long a search for the primary waits on a host when the client was given no connect timeout. */
const defaultConnectTimeoutMs = 5000;

/**
 * The pg client of every connection the service opens to PostgreSQL. It connects to the primary
 * among DATABASE_URL's hosts (primary.ts), and tells the locator when its server fails or turns out
 * read-only. It also closes its connection when an answer does not come in time: pg's own read
 * timeout fails the query but leaves it running on the connection, so the next statement on it (a
 * transaction's ROLLBACK) would queue behind a server that may never answer and wait the whole
 * timeout again; closed, the connection fails it at once and the pool replaces it.
 */
export class DatabaseClient extends pg.Client implements Abandonable {
  private readonly locator: PrimaryLocator;
  private readonly connectTimeoutMs: number;
  private server: DatabaseHost | undefined;
  private abandoned = false;
  private unconfirmedCommit: UnconfirmedCommitError | undefined;

  constructor(config: DatabaseClientConfig) {
    super(config);
    this.locator = config.locator;
    this.connectTimeoutMs = config.connectionTimeoutMillis ?? defaultConnectTimeoutMs;
    // pg reports a server ending the session (a shutdown's FATAL 57P01) as an error event, even on a
    // connection between owners (being connected, or released and closing) that nobody listens to
    // then, and an unheard error event ends the process. This listener hears every one: the
    // connection's statements fail anyway, and its owner's listener, when it has one, is told too.
    this.on("error", (error) => this.observe(error));
    // pg runs one statement at a time per connection and a notice comes before the end of the
    // statement that caused it, so the warning belongs to the next statement to finish.
    this.on("notice", (notice) => {
      if (isUnreplicatedCommit(notice)) this.unconfirmedCommit = new UnconfirmedCommitError(`${notice.message}: ${notice.detail ?? ""}`);
    });
    const query = this.query.bind(this) as (...args: unknown[]) => unknown;
    this.query = ((...args: unknown[]) => {
      const callback = args.at(-1);
      if (typeof callback === "function") {
        args[args.length - 1] = (error: Error | undefined, ...rest: unknown[]) => {
          const failure = error ?? this.takeUnconfirmedCommit();
          if (failure === undefined) (callback as Callback)(undefined, ...rest);
          else (callback as Callback)(failure);
          this.observe(failure);
        };
        return query(...args);
      }
      const result = query(...args);
      if (!(result instanceof Promise)) return result;
      return result.then(
        (value: unknown) => {
          const failure = this.takeUnconfirmedCommit();
          if (failure === undefined) return value;
          this.observe(failure);
          throw failure;
        },
        (error: unknown) => {
          this.takeUnconfirmedCommit();
          this.observe(error);
          throw error;
        },
      );
    }) as pg.Client["query"];
  }

  /** The warning of an unreplicated commit that came during the statement that just finished, once. */
  private takeUnconfirmedCommit(): UnconfirmedCommitError | undefined {
    const warning = this.unconfirmedCommit;
    this.unconfirmedCommit = undefined;
    return warning;
  }

  /** Closes the connection under whatever it is doing: its statements fail at once. */
  abandon(): void {
    if (this.abandoned) return;
    this.abandoned = true;
    this.connection.stream.destroy();
    // Told only when the socket closes, a pool could hand this connection, idle, to the next call
    // meanwhile; told now, it drops it first.
    this.emit("error", new Error("Connection terminated: closed by the service"));
  }

  override connect(): Promise<pg.Client>;
  override connect(callback: ConnectCallback): void;
  override connect(callback?: ConnectCallback): Promise<pg.Client> | undefined {
    const connected = this.connectToPrimary().then(() => this);
    if (callback === undefined) return connected;
    connected.then(
      (client) => (callback as (error: null, client: pg.Client) => void)(null, client),
      (error: Error) => (callback as (error: Error) => void)(error),
    );
    return undefined;
  }

  private async connectToPrimary(): Promise<void> {
    const server = await this.locator.target(this.connectTimeoutMs);
    if (this.locator.follows) {
      this.host = server.host;
      this.port = server.port;
    }
    await super.connect().catch((error: unknown) => {
      this.locator.suspect(server);
      throw error;
    });
    const accepted = await this.locator.accepts(this).catch(async (error: unknown) => {
      // The check failed, not the server's answer to it: the connection is of no use, and would stay open.
      this.locator.suspect(server);
      await this.end().catch(() => undefined);
      throw error;
    });
    let refusal: Error | undefined;
    if (!accepted) {
      this.locator.leave(server);
      refusal = this.locator.refusal(server);
    } else if (!this.locator.joined(this, server)) {
      refusal = this.locator.moved(server);
    }
    if (refusal !== undefined) {
      await this.end().catch(() => undefined);
      throw refusal;
    }
    this.server = server;
    this.once("end", () => this.locator.left(this));
  }

  /**
   * What a failed statement says about the server: a read-only one, a silent one and one whose
   * standby stopped confirming commits are left (the primary may have moved), a closing one suspected.
   */
  private observe(error: unknown): void {
    if (!(error instanceof Error) || this.server === undefined) return;
    const code = (error as { code?: unknown }).code;
    if (error.message === readTimeoutMessage || code === "25006" || error instanceof UnconfirmedCommitError) {
      this.abandon();
      this.locator.leave(this.server);
    } else if (typeof code === "string" && shuttingDownStates.has(code)) {
      this.locator.suspect(this.server);
    }
  }
}

/**
 * What every pool and connection of DATABASE_URL is made with: the first host's URL, which pg and
 * TypeORM read for the user, database and TLS settings, and the client that follows the primary
 * among all the hosts.
 */
export function connectionOptions(databaseUrl: string): {
  connectionString: string;
  Client: typeof DatabaseClient;
  locator: PrimaryLocator;
} {
  const locator = PrimaryLocator.of(databaseUrl);
  return { connectionString: locator.address.hosts[0]!.url, Client: DatabaseClient, locator };
}

/** A connection of its own (a LISTEN, the liveness lock, the readiness probe) that follows the primary like the pools'. */
export function databaseClient(databaseUrl: string, config: pg.ClientConfig = {}): DatabaseClient {
  const { Client, ...options } = connectionOptions(databaseUrl);
  return new Client({ ...config, ...options });
}

/**
 * The pg pool options of an instance's pools: connections that follow the primary, `max` of them, a deadline on getting one, PostgreSQL's
 * own statement, lock and idle-in-transaction timeouts set on every session, and a deadline on every
 * answer slightly past statement_timeout, so that no call waits on PostgreSQL without end, whether it
 * is slow, restarting, gone or frozen.
 */
export function poolOptions(databaseUrl: string, timeouts: DatabaseTimeouts, max: number): Record<string, unknown> {
  return {
    ...connectionOptions(databaseUrl),
    max,
    connectionTimeoutMillis: timeouts.connectTimeoutMs,
    statement_timeout: timeouts.statementTimeoutMs,
    lock_timeout: timeouts.lockTimeoutMs,
    idle_in_transaction_session_timeout: timeouts.idleInTransactionTimeoutMs,
    query_timeout: timeouts.statementTimeoutMs + answerMarginMs,
    keepAlive: true,
    idleTimeoutMillis: idleConnectionMs,
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
