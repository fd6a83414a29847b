import { describe, expect, it } from "vitest";
import { databaseNameOf, parseDatabaseUrl, withDatabaseName } from "./address.js";

describe("parseDatabaseUrl", () => {
  it("gives a single-host URL back unchanged, so pg reads it exactly as before", () => {
    for (const url of [
      "postgres://u:p%40ss@db.internal:5433/payments?sslmode=require",
      "postgresql:///payments?host=/var/run/postgresql",
      "postgres://u@[::1]/payments",
    ]) {
      const address = parseDatabaseUrl(url);
      expect(address.hosts.map((h) => h.url)).toEqual([url]);
      expect(address.sessionAttrs).toBe("any");
    }
    expect(parseDatabaseUrl("postgres://u@[::1]/payments").hosts[0]).toMatchObject({ host: "::1", port: 5432, label: "::1:5432" });
    expect(parseDatabaseUrl("postgresql:///payments?host=/var/run/postgresql").hosts[0]!.label).toBe("/var/run/postgresql:5432");
  });

  it("splits libpq's list of hosts into one URL per host, in order, keeping user, database and parameters", () => {
    const address = parseDatabaseUrl(
      "postgres://app:s3cret@10.0.0.1:5432,db-b,[fd00::2]:6432/payments?sslmode=require&target_session_attrs=read-write&application_name=api",
    );
    expect(address.sessionAttrs).toBe("read-write");
    expect(address.hosts).toEqual([
      {
        label: "10.0.0.1:5432",
        host: "10.0.0.1",
        port: 5432,
        url: "postgres://app:s3cret@10.0.0.1:5432/payments?sslmode=require&application_name=api",
      },
      {
        label: "db-b:5432",
        host: "db-b",
        port: 5432,
        url: "postgres://app:s3cret@db-b:5432/payments?sslmode=require&application_name=api",
      },
      {
        label: "[fd00::2]:6432",
        host: "fd00::2",
        port: 6432,
        url: "postgres://app:s3cret@[fd00::2]:6432/payments?sslmode=require&application_name=api",
      },
    ]);
  });

  it("takes primary and any, and drops target_session_attrs from a single host's URL too", () => {
    expect(parseDatabaseUrl("postgres://u@a,b/db?target_session_attrs=primary").sessionAttrs).toBe("primary");
    const single = parseDatabaseUrl("postgres://u@a:5433/db?target_session_attrs=read-write");
    expect(single.hosts.map((h) => h.url)).toEqual(["postgres://u@a:5433/db"]);
    expect(single.sessionAttrs).toBe("read-write");
  });

  it.each([
    ["postgres://u@a,b/db?target_session_attrs=standby", /target_session_attrs=standby; the service writes/],
    ["postgres://u@a,b/db?target_session_attrs=read-only", /target_session_attrs=read-only/],
    ["postgres://u@a:5432,b:99999/db", /port is not a port from 1 to 65535 \("99999"\)/],
    ["postgres://u@a:5432,b:x/db", /port is not a port/],
    ["postgres://u@a,,b/db", /an empty host/],
    ["postgres://u@a,b/db?host=/tmp", /both in the authority/],
    ["mysql://u@a/db", /not a postgres/],
  ])("refuses %s, saying why", (url, reason) => {
    expect(() => parseDatabaseUrl(url)).toThrow(reason);
  });

  it("never repeats the password in a refusal", () => {
    expect(() => parseDatabaseUrl("postgres://u:hunter2@a,b:0/db")).toThrow(/^(?!.*hunter2)/s);
  });
});

describe("withDatabaseName and databaseNameOf", () => {
  it.each([
    ["postgres://u:p@db:5433/payments?sslmode=require", "postgres://u:p@db:5433/other?sslmode=require"],
    [
      "postgres://u@a:5432,b:5433/payments?target_session_attrs=read-write",
      "postgres://u@a:5432,b:5433/other?target_session_attrs=read-write",
    ],
    ["postgresql:///payments?host=/var/run/postgresql", "postgresql:///other?host=/var/run/postgresql"],
    ["postgres://u@a,b", "postgres://u@a,b/other"],
  ])("renames the database of %s, hosts and parameters unchanged", (url, renamed) => {
    expect(withDatabaseName(url, "other")).toBe(renamed);
    expect(databaseNameOf(renamed)).toBe("other");
  });

  it("reads the database of a list of hosts", () => {
    expect(databaseNameOf("postgres://u@a:5432,b:5433/payments_f_1?target_session_attrs=read-write")).toBe("payments_f_1");
  });
});
