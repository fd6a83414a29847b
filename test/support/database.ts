import { randomBytes } from "node:crypto";
import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type pg from "pg";
import { inject } from "vitest";
import { databaseNameOf, parseDatabaseUrl, withDatabaseName } from "../../src/db/address.js";
import { applyMigrations } from "../../src/db/data-source.js";
import { databaseClient } from "../../src/db/pool.js";
import { migrations } from "../../src/migrations/index.js";
import { startEmbeddedDatabase } from "../../src/db/embedded.js";

/*
 * On PostgreSQL every test file works in a database of its own, cloned from DATABASE_URL's migrated
 * database (the template). Files then never share jobs or clocks: a file that moves its clock a
 * week ahead cannot expire another file's authorizations. On the embedded database every service
 * has an in-memory database of its own, a copy of one migrated snapshot (the embedded template):
 * creating a cluster takes seconds, and the suite starts over a hundred.
 */

declare module "vitest" {
  export interface ProvidedContext {
    /** The embedded template's directory (global-setup.ts), when the tests run on the embedded database. */
    embeddedTemplateDir: string;
  }
}

/** Runs `work` on a client of its own connected to the database at `url` (PostgreSQL's or the embedded one's), closed after. */
export async function onDatabase<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = databaseClient(url);
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

function onServer<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  return onDatabase(withDatabaseName(url, "postgres"), work);
}

/** Prefix of the per-file databases cloned from the template at `url`. */
function clonePrefix(url: string): string {
  return `${databaseNameOf(url)}_f_`;
}

/**
 * Whether the tests run on real PostgreSQL: races between instances exist only there, as the embedded
 * database serializes every statement and belongs to one instance.
 */
export const onPostgres = process.env.DATABASE_URL !== undefined;

let fileDatabase: Promise<string> | undefined;

/**
 * Makes the next fileDatabaseUrl() clone a database afresh: test files that share this module (a
 * tier that does not isolate its files) still each get one of their own (file-setup.ts).
 */
export function forgetFileDatabase(): void {
  fileDatabase = undefined;
}

/** A host that refuses every connection at once: nothing listens on port 1. */
const refusingHost = "127.0.0.1:1";

/**
 * `url`, a cluster of the test's own, in the form DATABASE_URL has: when the suite runs on a list of
 * hosts (CI's fault suite does, decisions §12), a list too, a host that refuses connections first,
 * so that the services of tests with clusters of their own also find their primary by the search.
 */
export function inSuiteForm(url: string): string {
  const suite = process.env.DATABASE_URL;
  if (suite === undefined || parseDatabaseUrl(suite).hosts.length === 1) return url;
  const [, start, hosts, rest] = /^(postgres(?:ql)?:\/\/(?:[^@/?#]*@)?)([^/?#]*)(.*)$/s.exec(url)!;
  return `${start}${refusingHost},${hosts}${rest}${rest!.includes("?") ? "&" : "?"}target_session_attrs=read-write`;
}

/** This test file's own database (created on first use), or undefined on the embedded database. */
export function fileDatabaseUrl(): Promise<string> | undefined {
  const template = process.env.DATABASE_URL;
  if (template === undefined) return undefined;
  fileDatabase ??= onServer(template, async (client) => {
    const name = `${clonePrefix(template)}${randomBytes(6).toString("hex")}`;
    const source = databaseNameOf(template);
    for (let attempt = 1; ; attempt++) {
      try {
        await client.query(`CREATE DATABASE "${name}" TEMPLATE "${source}"`);
        return withDatabaseName(template, name);
      } catch (error) {
        // Two files cloning at the same instant briefly see each other on the template; try again.
        if (attempt >= 20 || !String(error).includes("being accessed by other users")) throw error;
        await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
      }
    }
  });
  return fileDatabase;
}

/**
 * A new database with nothing in it, not even the migrations, on DATABASE_URL's server: what a first
 * deploy meets. Named like the per-file databases, so the run drops it with them.
 */
export async function emptyDatabaseUrl(): Promise<string> {
  const template = process.env.DATABASE_URL;
  if (template === undefined) throw new Error("emptyDatabaseUrl needs DATABASE_URL (PostgreSQL)");
  return onServer(template, async (client) => {
    const name = `${clonePrefix(template)}${randomBytes(6).toString("hex")}`;
    await client.query(`CREATE DATABASE "${name}"`);
    return withDatabaseName(template, name);
  });
}

/**
 * An empty database of the caller's own, of the kind the run uses, for tests that build a schema
 * step by step (an upgrade, a migration): on PostgreSQL a new database on DATABASE_URL's server,
 * which the run drops with the per-file ones; else an embedded cluster in a temporary DATA_DIR named
 * after `name`, which `close` stops and removes.
 */
export async function databaseOfItsOwn(name: string): Promise<{ url: string; close: () => Promise<void> }> {
  if (onPostgres) return { url: await emptyDatabaseUrl(), close: async () => {} };
  const dataDir = await mkdtemp(path.join(tmpdir(), `${name}-`));
  const embedded = await startEmbeddedDatabase(dataDir, 2);
  return {
    url: embedded.url,
    close: async () => {
      await embedded.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Runs `work` on a client of its own connected to this test file's database, so it can hold locks and transactions the service must wait for. */
export async function onFileDatabase<T>(work: (db: pg.Client) => Promise<T>): Promise<T> {
  return onDatabase((await fileDatabaseUrl())!, work);
}

/** Something that runs SQL on the test file's database: an instance's data source or a pg client. */
export interface Sql {
  query(text: string, params?: unknown[]): Promise<unknown[] | { rows: unknown[] }>;
}

/** The rows of a query, whether a data source (an array) or a pg client (`{rows}`) ran it. */
export async function rows<T>(db: Sql, text: string, params: unknown[] = []): Promise<T[]> {
  const result = await db.query(text, params);
  return (Array.isArray(result) ? result : result.rows) as T[];
}

/** Drops every per-file database cloned from the template at `url`. */
export async function dropFileDatabases(url: string): Promise<void> {
  await onServer(url, async (client) => {
    const clones = await client.query<{ datname: string }>("SELECT datname FROM pg_database WHERE starts_with(datname, $1)", [
      clonePrefix(url),
    ]);
    for (const { datname } of clones.rows) await client.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
  });
}

/** The embedded template's snapshot, in the directory global-setup.ts writes it to. */
const snapshotFile = "snapshot.tar";
/** The embedded template as a DATA_DIR, beside the snapshot. */
const templateDataDir = "data-dir";

/**
 * Writes the embedded template into `dir`: the snapshot of an in-memory embedded database, migrated,
 * which in-process services start from, and a DATA_DIR holding the same cluster, which server
 * processes start from (copied, see serverProcessDatabase).
 */
export async function writeEmbeddedTemplate(dir: string): Promise<void> {
  const embedded = await startEmbeddedDatabase(":memory:", 1);
  let snapshot: Blob;
  try {
    await applyMigrations(embedded.url, 10_000, migrations);
    snapshot = await embedded.snapshot();
  } finally {
    await embedded.close();
  }
  await writeFile(path.join(dir, snapshotFile), Buffer.from(await snapshot.arrayBuffer()));
  await (await startEmbeddedDatabase(path.join(dir, templateDataDir), 1, snapshot)).close();
}

let embeddedTemplateCopy: Promise<Blob> | undefined;

/** The embedded template, read once per test file; undefined on PostgreSQL. */
export function embeddedTemplate(): Promise<Blob> | undefined {
  if (onPostgres) return undefined;
  embeddedTemplateCopy ??= readFile(path.join(inject("embeddedTemplateDir"), snapshotFile)).then((bytes) => new Blob([bytes]));
  return embeddedTemplateCopy;
}

/**
 * A DATA_DIR of its own for a server process on the embedded database, copied from the migrated
 * template: the server opens it in under a second where creating a cluster (initdb) and migrating it
 * takes several. It lies in the template's directory, which the run removes at its end.
 */
export async function migratedDataDir(): Promise<string> {
  const template = inject("embeddedTemplateDir");
  const dir = await mkdtemp(path.join(template, "copy-"));
  await cp(path.join(template, templateDataDir), dir, { recursive: true });
  return dir;
}

/**
 * Where a server process the calling test spawns keeps its data, as spawnServer's environment: this
 * file's PostgreSQL database (a few connections, as several servers may share it), or a migrated
 * DATA_DIR of its own on the embedded database.
 */
export async function serverProcessDatabase(): Promise<{ DATABASE_URL: string; DATABASE_POOL_SIZE: string } | { DATA_DIR: string }> {
  const url = await fileDatabaseUrl();
  return url === undefined ? { DATA_DIR: await migratedDataDir() } : { DATABASE_URL: url, DATABASE_POOL_SIZE: "4" };
}
