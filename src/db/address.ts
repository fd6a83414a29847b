/*
 * DATABASE_URL in libpq's multi-host form (decisions §12): `postgres://user@h1:5432,h2:5433/db
 * ?target_session_attrs=read-write`. node-postgres reads only single-host URLs, so the list is split
 * here into one URL per host, each of which pg reads as before, and the primary is found among them
 * by primary.ts.
 */

/** libpq's target_session_attrs values the service can use: it writes, so it never asks for a standby. */
const sessionAttrs = ["any", "read-write", "primary"] as const;

/** Which server a connection may settle on: any that answers, one that takes writes, one not in recovery. */
export type SessionAttrs = (typeof sessionAttrs)[number];

/** One host of the list, with the connection string pg reads for it. */
export interface DatabaseHost {
  /** `host:port`, for logs, metrics and error messages (never the URL, which may hold a password). */
  readonly label: string;
  readonly host: string;
  readonly port: number;
  /** The URL with this host alone and without target_session_attrs, which pg does not know. */
  readonly url: string;
}

/** Where the service's database is: its hosts in the order given, and which of them may serve it. */
export interface DatabaseAddress {
  readonly hosts: readonly DatabaseHost[];
  readonly sessionAttrs: SessionAttrs;
}

const defaultPort = 5432;

/**
 * Splits a postgres:// URL into its hosts. Throws, without repeating the URL (it may hold a
 * password), when a host's port is not a port, the list is empty, or target_session_attrs asks for
 * something the service cannot use. A single-host URL comes back unchanged as its one host's URL.
 */
export function parseDatabaseUrl(value: string): DatabaseAddress {
  const parts = /^(postgres(?:ql)?:\/\/)([^/?#]*)(.*)$/s.exec(value);
  if (parts === null) throw new Error("is not a postgres:// or postgresql:// URL");
  const [, scheme, authority, rest] = parts as unknown as [string, string, string, string];
  const at = authority.lastIndexOf("@");
  const userinfo = at === -1 ? "" : authority.slice(0, at + 1);
  const hostList = authority.slice(at + 1);
  const { path, params } = splitQuery(rest);
  const attrs = params.filter(([name]) => name === "target_session_attrs").map(([, v]) => decodeURIComponent(v ?? ""));
  const attr = attrs.at(-1) ?? "any";
  if (!(sessionAttrs as readonly string[]).includes(attr)) {
    throw new Error(`has target_session_attrs=${attr}; the service writes, so it takes ${sessionAttrs.join(", ")}`);
  }
  const query = params.filter(([name]) => name !== "target_session_attrs").map(([name, v]) => (v === undefined ? name : `${name}=${v}`));
  const tail = path + (query.length > 0 ? `?${query.join("&")}` : "");
  const entries = hostList.split(",");
  if (entries.length === 1) {
    const [host, port] = hostAndPort(entries[0]!);
    const url = attrs.length === 0 ? value : `${scheme}${userinfo}${hostList}${tail}`;
    const socket = params.find(([name]) => name === "host")?.[1];
    const label = `${host === "" ? decodeURIComponent(socket ?? "localhost") : host}:${port}`;
    return { hosts: [{ label, host, port, url }], sessionAttrs: attr as SessionAttrs };
  }
  if (params.some(([name]) => name === "host" || name === "hostaddr" || name === "port")) {
    throw new Error("names its hosts both in the authority (h1,h2) and in a host, hostaddr or port parameter; give the list once");
  }
  const hosts = entries.map((entry) => {
    if (entry === "") throw new Error("has an empty host in its list of hosts");
    const [host, port] = hostAndPort(entry);
    const authorityHost = host.includes(":") ? `[${host}]` : host;
    return { label: `${authorityHost}:${port}`, host, port, url: `${scheme}${userinfo}${authorityHost}:${port}${tail}` };
  });
  return { hosts, sessionAttrs: attr as SessionAttrs };
}

/** The path before `?`, and the query's name/value pairs as written (values still percent-encoded). */
function splitQuery(rest: string): { path: string; params: [string, string | undefined][] } {
  const mark = rest.indexOf("?");
  if (mark === -1) return { path: rest, params: [] };
  const params = rest
    .slice(mark + 1)
    .split("&")
    .filter((pair) => pair !== "")
    .map((pair): [string, string | undefined] => {
      const eq = pair.indexOf("=");
      return eq === -1 ? [pair, undefined] : [pair.slice(0, eq), pair.slice(eq + 1)];
    });
  return { path: rest.slice(0, mark), params };
}

/** `host`, `host:port`, `[v6]` or `[v6]:port`; an empty host (a socket given as ?host=) keeps its place. */
function hostAndPort(entry: string): [string, number] {
  const bracketed = /^\[([^\]]*)\](?::(.*))?$/.exec(entry);
  const [host, port] = bracketed !== null ? [bracketed[1]!, bracketed[2]] : splitPort(entry);
  if (port === undefined || port === "") return [decodeURIComponent(host), defaultPort];
  const number = /^[0-9]{1,5}$/.test(port) ? Number(port) : Number.NaN;
  if (!(number >= 1 && number <= 65535)) throw new Error(`has a host whose port is not a port from 1 to 65535 ("${port}")`);
  return [decodeURIComponent(host), number];
}

function splitPort(entry: string): [string, string | undefined] {
  const colon = entry.lastIndexOf(":");
  return colon === -1 ? [entry, undefined] : [entry.slice(0, colon), entry.slice(colon + 1)];
}

/** The URL's parts around its database name: the hosts before it, the parameters after. */
function databaseParts(url: string): { before: string; name: string; after: string } {
  const parts = /^(postgres(?:ql)?:\/\/[^/?#]*)(?:\/([^?#]*))?(.*)$/s.exec(url);
  if (parts === null) throw new Error("is not a postgres:// or postgresql:// URL");
  return { before: parts[1]!, name: decodeURIComponent(parts[2] ?? ""), after: parts[3] ?? "" };
}

/** The database a URL names, for one host or several (an operator's command, a test cloning it). */
export function databaseNameOf(url: string): string {
  return databaseParts(url).name;
}

/** The same URL, hosts and parameters unchanged, naming database `name` instead. */
export function withDatabaseName(url: string, name: string): string {
  const { before, after } = databaseParts(url);
  return `${before}/${encodeURIComponent(name)}${after}`;
}
