import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { PGLiteSocketServer } from "@electric-sql/pglite-socket";
import { lockDataDir, type DataDirLock } from "./data-dir-lock.js";

/** A running embedded PostgreSQL, reachable with an ordinary connection string. */
export interface EmbeddedDatabase {
  readonly url: string;
  /** A copy of the whole cluster, which another in-memory embedded database can start from (`template`). */
  snapshot(): Promise<Blob>;
  close(): Promise<void>;
}

/**
 * Starts PGlite in-process and serves it on a loopback port, so the embedded default goes through
 * exactly the same `pg` driver and SQL as production PostgreSQL. `:memory:` keeps nothing.
 *
 * The socket server admits twice the pool's connections: the pool drops a connection whose query
 * failed and opens its replacement at once, before the server has seen the old one close, and a
 * server already at its limit turns the replacement away, failing a query that had nothing to do
 * with the error ("Connection terminated unexpectedly").
 *
 * A new database (in memory, or a DATA_DIR without a cluster yet) starts as a copy of `template` (a
 * snapshot) when one is given, instead of an empty cluster: creating a cluster takes seconds
 * (initdb), loading a copy under one, so the test suite starts its many databases from one
 * migrated snapshot.
 *
 * A database on disk has one owner: DATA_DIR's lock is taken first, and a second process on the
 * same directory gets DataDirInUseError instead of a copy of its own (data-dir-lock.ts).
 */
export async function startEmbeddedDatabase(dataDir: string, poolSize: number, template?: Blob): Promise<EmbeddedDatabase> {
  let db: PGlite;
  let lock: DataDirLock | undefined;
  if (dataDir === ":memory:") {
    db = await PGlite.create(template === undefined ? {} : { loadDataDir: template });
  } else {
    await mkdir(dataDir, { recursive: true });
    lock = await lockDataDir(dataDir);
    try {
      const dir = path.resolve(dataDir, "pgdata");
      await mkdir(dir, { recursive: true });
      const isNew = !existsSync(path.join(dir, "PG_VERSION"));
      db = await PGlite.create(isNew && template !== undefined ? { dataDir: dir, loadDataDir: template } : { dataDir: dir });
    } catch (error) {
      await lock.release();
      throw error;
    }
  }
  const server = new PGLiteSocketServer({ db: withBatchAffinity(db), host: "127.0.0.1", port: 0, maxConnections: 2 * poolSize });
  await server.start();
  return {
    url: `postgres://postgres@${server.getServerConn()}/postgres`,
    snapshot: () => db.dumpDataDir("none"),
    async close() {
      await server.stop();
      await db.close();
      await lock?.release();
    },
  };
}

/** Frontend messages of the extended query protocol that leave a batch open until its Sync. */
const batchMessages = new Set(["P", "B", "D", "E", "C", "H"].map((c) => c.charCodeAt(0)));
/** Sync, simple Query and Terminate: the session is back to ReadyForQuery afterwards. */
const batchEnds = new Set(["S", "Q", "X"].map((c) => c.charCodeAt(0)));

/**
 * PGlite has one session, which the socket server shares between connections message by message,
 * keeping one connection's turn only while a transaction is open. An extended-protocol query
 * outside a transaction (Parse, Bind, Execute … Sync) could then interleave with another
 * connection's and run against its statement: "portal does not exist", or wrong rows
 * (electric-sql/pglite#1046). This view of the database (the only members the server uses) reports
 * an open batch as a transaction, so the server keeps the connection's turn until its Sync.
 */
function withBatchAffinity(db: PGlite): PGlite {
  let batchOpen = false;
  const view: Pick<PGlite, "waitReady" | "isInTransaction" | "runExclusive" | "execProtocolRawStream" | "exec"> = {
    get waitReady() {
      return db.waitReady;
    },
    isInTransaction: () => batchOpen || db.isInTransaction(),
    runExclusive: (fn) => db.runExclusive(fn),
    execProtocolRawStream: (message, options) => {
      const type = message[0]!;
      if (batchMessages.has(type)) batchOpen = true;
      else if (batchEnds.has(type)) batchOpen = false;
      return db.execProtocolRawStream(message, options);
    },
    // The server's ROLLBACK for a connection that went away mid-transaction ends its batch too.
    exec: (query, options) => {
      batchOpen = false;
      return db.exec(query, options);
    },
  };
  return view as PGlite;
}
