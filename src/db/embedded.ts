import { mkdir } from "node:fs/promises";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { PGLiteSocketServer } from "@electric-sql/pglite-socket";

/** A running embedded PostgreSQL, reachable with an ordinary connection string. */
export interface EmbeddedDatabase {
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Starts PGlite in-process and serves it on a loopback port, so the embedded default goes through
 * exactly the same `pg` driver and SQL as production PostgreSQL. `:memory:` keeps nothing.
 */
export async function startEmbeddedDatabase(dataDir: string, maxConnections: number): Promise<EmbeddedDatabase> {
  let db: PGlite;
  if (dataDir === ":memory:") {
    db = await PGlite.create();
  } else {
    const dir = path.resolve(dataDir, "pgdata");
    await mkdir(dir, { recursive: true });
    db = await PGlite.create({ dataDir: dir });
  }
  const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections });
  await server.start();
  return {
    url: `postgres://postgres@${server.getServerConn()}/postgres`,
    async close() {
      await server.stop();
      await db.close();
    },
  };
}
