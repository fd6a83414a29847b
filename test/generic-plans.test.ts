import "reflect-metadata";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createContextValues } from "@connectrpc/connect";
import type pg from "pg";
import { DataSource } from "typeorm";
import type { PostgresDriver } from "typeorm/driver/postgres/PostgresDriver.js";
import { systemClock } from "../src/clock.js";
import { entities } from "../src/entities.js";
import { ObjectWriter } from "../src/objects/writer.js";
import { useNamedStatements } from "../src/db/prepared.js";
import { refreshStatistics } from "../src/db/statistics.js";
import { newId } from "../src/ids.js";
import { PaymentRow } from "../src/payments/payment.entity.js";
import { paymentResource } from "../src/payments/store.js";
import { fileDatabaseUrl, onFileDatabase, onPostgres } from "./support/database.js";
import { newMerchant } from "./support/merchant.js";
import { createPayment as createPaymentOver } from "./support/payments.js";
import { runningInstance } from "./support/running.js";
import { sleep, waitUntil } from "./support/wait.js";

/*
 * The generic-plan trap (docs/architecture.md, "Writing new objects"; docs/performance.md, "Grown
 * database"): a named prepared statement that went generic while its tables were nearly empty keeps
 * that plan, a scan of the whole table, however much is loaded afterwards. An ANALYZE of the loaded
 * table ends it on every connection at once (PostgreSQL invalidates the cached plans that depend on
 * the table), and the service takes one of each table that changed by a tenth since its last
 * (src/db/statistics.ts). PostgreSQL only: the embedded database runs no named statements.
 */

describe.skipIf(!onPostgres)("the new-object write on a database that grew after it was prepared", () => {
  let dataSource: DataSource;
  let writer: ObjectWriter;
  /** auto_explain's plans of the statements the connection ran, newest last. */
  const plans: string[] = [];
  const run = (text: string) => dataSource.query(text);

  /** Writes a payment of merchant mer_a through the service's batched writer, and returns the plan its statement ran with. */
  async function createPayment(): Promise<string> {
    const now = systemClock.now();
    const paymentId = newId("pay");
    const row = Object.assign(new PaymentRow(), {
      merchantId: "mer_a",
      livemode: false,
      paymentId,
      profileId: "pro_a",
      status: "requires_payment_method",
      amount: 100n,
      currency: "USD",
      amountCapturable: 0n,
      amountReceived: null,
      captureMethod: "automatic",
      captureOn: null,
      paymentMethod: null,
      paymentMethodType: null,
      paymentMethodId: null,
      card: null,
      customerId: null,
      email: null,
      description: null,
      statementDescriptor: null,
      returnUrl: null,
      clientSecret: `${paymentId}_secret_x`,
      nextAction: null,
      errorCode: null,
      errorMessage: null,
      cancellationReason: null,
      metadata: {},
      processor: null,
      processorReference: null,
      authenticationToken: null,
      created: now,
      modifiedAt: now,
      claimToken: null,
      claimedUntil: null,
      claimedBy: null,
      attempt: null,
      setupFutureUsage: null,
      offSession: false,
      mandateId: null,
      mandateRequest: null,
    } satisfies PaymentRow);
    plans.length = 0;
    const view = await writer.create({ values: createContextValues() }, paymentResource, row, []);
    expect(view.paymentId).toBe(paymentId);
    const plan = plans.find((p) => p.includes('INSERT INTO "payments"'));
    expect(plan).toBeDefined();
    return plan!;
  }

  beforeAll(async () => {
    // One connection, so every statement runs in the session that prepared the write and explains it.
    dataSource = new DataSource({ type: "postgres", url: (await fileDatabaseUrl())!, entities, logging: false, extra: { max: 1 } });
    await dataSource.initialize();
    useNamedStatements(dataSource);
    // No webhook sender runs here: new deliveries are left to a look.
    writer = new ObjectWriter(dataSource, systemClock, {
      leaseForNew: () => undefined,
      adopt: () => undefined,
      abandon: () => undefined,
    });
    const pool = (dataSource.driver as PostgresDriver).master as pg.Pool;
    const client = await pool.connect();
    client.on("notice", (notice) => plans.push(notice.message ?? ""));
    client.release();
    await run(
      "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; SET auto_explain.log_level = notice; SET client_min_messages = notice",
    );
  });
  afterAll(() => dataSource?.destroy());

  it("uses the profiles index once the loaded table is analyzed, on the connection that prepared it", async () => {
    // A fresh deployment: its first merchant, and the statistics autovacuum takes of the tiny tables.
    await run("INSERT INTO merchants VALUES ('mer_a', NULL, 'pro_a', now())");
    await run("INSERT INTO profiles (profile_id, merchant_id, webhook_secret, created) VALUES ('pro_a', 'mer_a', 's', now())");
    await run("ANALYZE merchants, profiles, customers, payments, events, jobs, webhook_deliveries");
    // Past the five custom plans PostgreSQL makes before it settles on a generic one.
    for (let i = 0; i < 7; i++) await createPayment();
    expect(await createPayment()).toMatch(/Seq Scan on profiles/);

    // A bulk load: the plan prepared on the tiny table still reads all of it, for every write.
    await run(
      "INSERT INTO merchants SELECT 'mer_' || i, NULL, 'pro_' || i, now() FROM generate_series(1, 50000) AS i; " +
        "INSERT INTO profiles (profile_id, merchant_id, webhook_secret, created) SELECT 'pro_' || i, 'mer_' || i, 's', now() FROM generate_series(1, 50000) AS i",
    );
    expect(await createPayment()).toMatch(/Seq Scan on profiles/);

    // The service's own look at its tables' counters (which a backend publishes within seconds) analyzes what was loaded, once.
    const refreshed = await waitUntil(
      async () => {
        await sleep(200);
        return refreshStatistics(dataSource);
      },
      (tables) => tables.length > 0,
      100,
    );
    expect(refreshed).toEqual(["merchants", "profiles"]);
    expect(await refreshStatistics(dataSource)).toEqual([]);
    const analyzed = await createPayment();
    expect(analyzed).toMatch(/Index (Only )?Scan using profiles_pkey on profiles/);
    expect(analyzed).not.toMatch(/Seq Scan on profiles/);
  });
});

describe.skipIf(!onPostgres)("instances that find the same stale table at once", () => {
  it("analyze it once between them", async () => {
    const instances = await Promise.all(
      Array.from({ length: 6 }, async () => {
        const dataSource = new DataSource({
          type: "postgres",
          url: (await fileDatabaseUrl())!,
          entities,
          logging: false,
          extra: { max: 2 },
        });
        return dataSource.initialize();
      }),
    );
    try {
      const analyses = (db: pg.Client) =>
        db.query<{ analyses: string; changed: string }>(
          "SELECT analyze_count AS analyses, n_mod_since_analyze AS changed FROM pg_stat_user_tables WHERE relname = 'merchants'",
        );
      // More than the whole table the first test left (50,001 merchants, analyzed seconds ago): a
      // table analyzed within the minute is analyzed again only once it has doubled.
      await onFileDatabase((db) =>
        db.query("INSERT INTO merchants SELECT 'mer_stale_' || i, NULL, 'pro_stale_' || i, now() FROM generate_series(1, 60000) AS i"),
      );
      const before = await waitUntil(
        async () => {
          await sleep(200);
          return (await onFileDatabase(analyses)).rows[0]!;
        },
        (stats) => Number(stats.changed) >= 60000,
        100,
      );
      const analyzed = (await Promise.all(instances.map((instance) => refreshStatistics(instance)))).flat();
      expect(analyzed.filter((table) => table === "merchants")).toEqual(["merchants"]);
      expect(Number((await onFileDatabase(analyses)).rows[0]!.analyses) - Number(before.analyses)).toBe(1);
    } finally {
      await Promise.all(instances.map((instance) => instance.destroy()));
    }
  });
});

describe.skipIf(!onPostgres)("a table analyzed within the last minute", () => {
  const merchants = (db: pg.Client) =>
    db.query<{ changed: string; rows: string }>(
      `SELECT s.n_mod_since_analyze AS changed, c.reltuples::bigint AS rows FROM pg_stat_user_tables AS s
         JOIN pg_class AS c ON c.oid = s.relid WHERE s.relname = 'merchants'`,
    );
  /** Adds `count` merchants and waits until PostgreSQL's counters show the table changed by at least `atLeast` rows since its analysis. */
  async function addMerchants(prefix: string, count: number, atLeast: number): Promise<void> {
    await onFileDatabase((db) =>
      db.query(`INSERT INTO merchants SELECT '${prefix}' || i, NULL, 'pro_${prefix}' || i, now() FROM generate_series(1, ${count}) AS i`),
    );
    await waitUntil(
      async () => {
        await sleep(200);
        return Number((await onFileDatabase(merchants)).rows[0]!.changed);
      },
      (rows) => rows >= atLeast,
      100,
    );
  }

  it("is not analyzed again for growing by a tenth, and is once it has doubled", async () => {
    const dataSource = await new DataSource({ type: "postgres", url: (await fileDatabaseUrl())!, entities, logging: false }).initialize();
    try {
      // A table large enough that a fifth of it is far more than the 50 rows autovacuum adds to its
      // share, its rows counted before it is analyzed (counted after, they would count as changes).
      await addMerchants("mer_base_", 10000, 10000);
      await onFileDatabase((db) => db.query("ANALYZE merchants"));
      const analyzedRows = Number((await onFileDatabase(merchants)).rows[0]!.rows);
      // A fifth more is past a tenth; then as many again as it had, and it has doubled.
      const fifth = Math.ceil(analyzedRows / 5) + 100;
      await addMerchants("mer_fifth_", fifth, fifth);
      expect(await refreshStatistics(dataSource)).not.toContain("merchants");
      await addMerchants("mer_double_", analyzedRows, fifth + analyzedRows);
      expect(await refreshStatistics(dataSource)).toContain("merchants");
    } finally {
      await dataSource.destroy();
    }
  });
});

describe.skipIf(!onPostgres)("a running service whose payments table was loaded in bulk", () => {
  const service = runningInstance();

  it("analyzes the table within seconds, after which a merchant's page of payments is read from payments_list, not sorted from all its rows", async () => {
    const merchant = await newMerchant(service.url);
    const first = await createPaymentOver(service.url, merchant);
    const lastAnalysis = (db: pg.Client) =>
      db.query<{ at: Date | null }>(
        "SELECT greatest(last_analyze, last_autoanalyze) AS at FROM pg_stat_user_tables WHERE relname = 'payments'",
      );
    const before = (await onFileDatabase(lastAnalysis)).rows[0]!.at;
    await onFileDatabase((db) =>
      db.query(
        `INSERT INTO payments SELECT copy.* FROM payments AS p CROSS JOIN generate_series(1, 10000) AS i
         CROSS JOIN LATERAL jsonb_populate_record(NULL::payments, to_jsonb(p) || jsonb_build_object(
           'payment_id', p.payment_id || '_' || i, 'client_secret', p.client_secret || '_' || i, 'created', p.created - i * interval '1 second')) AS copy
         WHERE p.payment_id = $1`,
        [first.payment_id],
      ),
    );
    await waitUntil(
      async () => {
        await sleep(200);
        return (await onFileDatabase(lastAnalysis)).rows[0]!.at;
      },
      (at) => at !== null && (before === null || at > before),
      100,
    );
    const plan = await onFileDatabase(async (db) =>
      (
        await db.query<{ "QUERY PLAN": string }>(
          "EXPLAIN SELECT * FROM payments WHERE merchant_id = $1 AND livemode = false ORDER BY created DESC, payment_id DESC LIMIT 10",
          [merchant.merchantId],
        )
      ).rows
        .map((row) => row["QUERY PLAN"])
        .join("\n"),
    );
    expect(plan).toMatch(/Index Scan using payments_list on payments/);
    expect(plan).not.toMatch(/Sort/);
    const page = await fetch(`${service.url}/payments/list?limit=10`, { headers: { "api-key": merchant.apiKey } });
    expect(page.status).toBe(200);
    const body = (await page.json()) as { data: { payment_id: string }[]; total_count: number };
    expect({ first: body.data[0]?.payment_id, shown: body.data.length, total: body.total_count }).toEqual({
      first: first.payment_id,
      shown: 10,
      total: 10_001,
    });
  });

  it("leaves the JSON columns out of every analysis but the one a statement filters on: the rest were a third of its time on events", async () => {
    const { jsonColumns, unanalyzed, payments, recovery } = await onFileDatabase(async (db) => {
      const columns = await db.query<{ name: string; target: number }>(
        `SELECT c.relname || '.' || a.attname AS name, a.attstattarget AS target FROM pg_attribute AS a
           JOIN pg_class AS c ON c.oid = a.attrelid JOIN pg_namespace AS n ON n.oid = c.relnamespace
          WHERE n.nspname = current_schema() AND c.relkind = 'r' AND a.atttypid = 'jsonb'::regtype AND NOT a.attisdropped`,
      );
      const analyzed = await db.query<{ name: string }>("SELECT attname AS name FROM pg_stats WHERE tablename = 'payments'");
      const plan = await db.query<{ "QUERY PLAN": string }>("EXPLAIN SELECT payment_id FROM payments WHERE attempt IS NOT NULL LIMIT 100");
      return {
        jsonColumns: columns.rows.map((column) => column.name),
        unanalyzed: columns.rows.filter((column) => column.target === 0).map((column) => column.name),
        payments: analyzed.rows.map((column) => column.name),
        recovery: plan.rows.map((row) => row["QUERY PLAN"]).join("\n"),
      };
    });
    // Recovery looks for open attempts every second: with the column's nulls known, by their partial index.
    expect(unanalyzed.sort()).toEqual(jsonColumns.filter((column) => column !== "payments.attempt").sort());
    expect(payments).toEqual(expect.arrayContaining(["merchant_id", "status", "created", "attempt"]));
    expect(payments).not.toEqual(expect.arrayContaining(["card"]));
    expect(payments).not.toEqual(expect.arrayContaining(["metadata"]));
    expect(recovery).toMatch(/Index Scan using payments_unsettled on payments/);
  });
});
