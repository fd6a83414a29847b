import pg from "pg";
import { log } from "../log.js";
import { type DatabaseAddress, type DatabaseHost, parseDatabaseUrl, type SessionAttrs } from "./address.js";

/*
 * Following the primary (decisions §12). With several hosts in DATABASE_URL, every new connection
 * goes to the host last found to be the primary; the search runs again when a connection to it
 * fails or its server says it is read-only or shutting down, which is what a failover or a
 * switchover looks like from here. When the search settles on another host, the connections still
 * open to the old one are closed: a demoted server would refuse their writes, and a frozen one would
 * hold them until their read timeout. A single host is used as before, with no search.
 */

/**
 * How long a search that found no primary answers the calls after it: during a failover there is
 * none for seconds, and every call of every pool asking every host again would only load the standby
 * being promoted.
 */
const failedSearchMs = 250;

/** What a connection asks the server it reached; `any` takes whichever server answered. */
const acceptance: Readonly<Record<Exclude<SessionAttrs, "any">, { sql: string; refusal: string }>> = {
  "read-write": { sql: "SELECT current_setting('transaction_read_only') = 'off' AS accepted", refusal: "is read-only" },
  primary: { sql: "SELECT NOT pg_is_in_recovery() AS accepted", refusal: "is in recovery (a standby)" },
};

/** A connection the locator may close: one to a server that is no longer the primary. */
export interface Abandonable {
  abandon(): void;
}

/**
 * No host of the list is (or still is) what target_session_attrs asks for. Its code is libpq's for a
 * connection it could not establish, so the call gets 503 SU_01 and is retried.
 */
export class NoPrimaryError extends Error {
  readonly code = "08001";
  override readonly name = "NoPrimaryError";
}

/** The locators of this thread, one per DATABASE_URL, shared by every pool and connection of it. */
const locators = new Map<string, PrimaryLocator>();

/** Finds and remembers which host of DATABASE_URL is the primary, for every connection of one thread. */
export class PrimaryLocator {
  private elected: DatabaseHost | undefined;
  /** The host connections went to before the current search, which a change is logged against. */
  private lastPrimary: DatabaseHost | undefined;
  private searching: Promise<DatabaseHost> | undefined;
  private failed: { until: number; error: NoPrimaryError } | undefined;
  private readonly connections = new Map<Abandonable, DatabaseHost>();
  private primaryChanges = 0;

  private constructor(readonly address: DatabaseAddress) {}

  /** The thread's locator for `databaseUrl`, made on first use. */
  static of(databaseUrl: string): PrimaryLocator {
    let locator = locators.get(databaseUrl);
    if (locator === undefined) {
      locator = new PrimaryLocator(parseDatabaseUrl(databaseUrl));
      locators.set(databaseUrl, locator);
    }
    return locator;
  }

  /** Whether there is a list to follow; with one host, connections go to it as they always did. */
  get follows(): boolean {
    return this.address.hosts.length > 1;
  }

  /** The host connections go to now, when one is known: for the log and the metrics. */
  get primary(): DatabaseHost | undefined {
    return this.follows ? this.elected : this.address.hosts[0];
  }

  /** How many times this thread's connections moved to another host. */
  get changes(): number {
    return this.primaryChanges;
  }

  /** The host a new connection goes to: the known primary, or the one a search finds now. */
  target(connectTimeoutMs: number): Promise<DatabaseHost> {
    if (!this.follows) return Promise.resolve(this.address.hosts[0]!);
    if (this.elected !== undefined) return Promise.resolve(this.elected);
    if (this.failed !== undefined && Date.now() < this.failed.until) return Promise.reject(this.failed.error);
    this.searching ??= this.search(connectTimeoutMs).finally(() => {
      this.searching = undefined;
    });
    return this.searching;
  }

  /** Whether the server `client` reached is one target_session_attrs takes; `any` takes every one. */
  async accepts(client: pg.Client): Promise<boolean> {
    if (this.address.sessionAttrs === "any") return true;
    const { rows } = await client.query<{ accepted: boolean }>(acceptance[this.address.sessionAttrs].sql);
    return rows[0]?.accepted === true;
  }

  /** A refusal naming the host and what it is, for a connection that reached a server it cannot use. */
  refusal(host: DatabaseHost): NoPrimaryError {
    const attrs = this.address.sessionAttrs as Exclude<SessionAttrs, "any">;
    return new NoPrimaryError(`the PostgreSQL server at ${host.label} ${acceptance[attrs].refusal} (target_session_attrs=${attrs})`);
  }

  /** A refusal for a connection that reached `host` after the primary had moved elsewhere. */
  moved(host: DatabaseHost): NoPrimaryError {
    return new NoPrimaryError(`the primary moved from ${host.label} to ${this.elected?.label} while a connection to it was opened`);
  }

  /**
   * Something went wrong on or with `host` (a connection failed, the server said it is read-only or
   * shutting down, an answer did not come): if it is the primary, the next connection searches again.
   */
  suspect(host: DatabaseHost): void {
    if (this.elected === host) this.elected = undefined;
  }

  /**
   * `host` is no longer the primary, or no longer answers: a write there was refused as read-only, or
   * an answer did not come in time. Every connection to it is closed, not only the one that learned
   * it, so that each idle one does not fail a call of its own first.
   */
  leave(host: DatabaseHost): void {
    this.suspect(host);
    for (const [connection, at] of this.connections) {
      if (at === host) {
        this.connections.delete(connection);
        connection.abandon();
      }
    }
  }

  /**
   * A connection opened to `host`, to be closed if the primary moves elsewhere; false when it already
   * has (a search settled on another host while this one connected), and the connection must not be used.
   */
  joined(connection: Abandonable, host: DatabaseHost): boolean {
    if (!this.follows || this.address.sessionAttrs === "any") return true;
    if (this.elected !== undefined && this.elected !== host) return false;
    this.connections.set(connection, host);
    return true;
  }

  /** A connection closed. */
  left(connection: Abandonable): void {
    this.connections.delete(connection);
  }

  /**
   * Asks every host at once and takes the first that answers as target_session_attrs asks: a host
   * that does not answer at all (a frozen machine) costs the search nothing while another answers.
   */
  private search(connectTimeoutMs: number): Promise<DatabaseHost> {
    const { hosts } = this.address;
    const reasons: string[] = [];
    return new Promise<DatabaseHost>((resolve, reject) => {
      let pending = hosts.length;
      let settled = false;
      for (const host of hosts) {
        void this.probe(host, connectTimeoutMs).then((reason) => {
          pending--;
          if (settled) return;
          if (reason === undefined) {
            settled = true;
            this.elect(host);
            resolve(host);
            return;
          }
          reasons.push(`${host.label} ${reason}`);
          if (pending === 0) {
            settled = true;
            const error = new NoPrimaryError(
              `no PostgreSQL server of DATABASE_URL is usable now (target_session_attrs=${this.address.sessionAttrs}): ${reasons.join("; ")}`,
            );
            if (this.failed === undefined) log.warn("no database primary found", { reasons });
            this.failed = { until: Date.now() + failedSearchMs, error };
            reject(error);
          }
        });
      }
    });
  }

  /** Why `host` cannot be the primary now, or undefined when it can. */
  private async probe(host: DatabaseHost, connectTimeoutMs: number): Promise<string | undefined> {
    const client = new pg.Client({
      connectionString: host.url,
      connectionTimeoutMillis: connectTimeoutMs,
      query_timeout: connectTimeoutMs,
      application_name: "payment-service primary search",
    });
    // A connection that breaks during the probe fails its query; unheard, the error would end the process.
    client.on("error", () => undefined);
    try {
      await client.connect();
      if (await this.accepts(client)) return undefined;
      return acceptance[this.address.sessionAttrs as Exclude<SessionAttrs, "any">].refusal;
    } catch (error) {
      return `did not answer (${error instanceof Error ? error.message : String(error)})`;
    } finally {
      void client.end().catch(() => undefined);
    }
  }

  /** Settles on `host` and closes the connections to any other, which cannot be the primary. */
  private elect(host: DatabaseHost): void {
    this.elected = host;
    this.failed = undefined;
    for (const [connection, at] of this.connections) {
      if (at !== host) {
        this.connections.delete(connection);
        connection.abandon();
      }
    }
    if (this.lastPrimary === undefined) {
      log.info("database primary found", { host: host.label, hosts: this.address.hosts.map((h) => h.label) });
    } else if (this.lastPrimary !== host) {
      this.primaryChanges++;
      log.warn("database primary changed", { from: this.lastPrimary.label, to: host.label });
    }
    this.lastPrimary = host;
  }
}
