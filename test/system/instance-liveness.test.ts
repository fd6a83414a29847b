import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { visaCard as card } from "../support/cards.js";
import { rest } from "../support/clients.js";
import { fileDatabaseUrl, onPostgres, rows } from "../support/database.js";
import { eventTypes } from "../support/events.js";
import { newMerchant } from "../support/merchant.js";
import { createPayment } from "../support/payments.js";
import { payoutAccounts, payoutBodies } from "../support/payout-destinations.js";
import { spawnServer, type ServerProcess } from "../support/server-process.js";
import { waitUntil } from "../support/wait.js";

/*
 * Leases of an instance killed with SIGKILL are taken over at once, not after their 60 s (found by
 * the kill -9 oracle, test/faults/kill-oracle.fault.ts: every kill left retries answered IK_01 and
 * refunds and payouts pending for a minute). Each lease names its instance, which holds a session
 * advisory lock while it lives (src/db/liveness.ts); PostgreSQL drops it when the killed process's
 * connection closes. Real server processes, since only a real kill closes connections: PostgreSQL only.
 */

const { bankPayout } = payoutBodies(() => new Date());

describe.skipIf(!onPostgres)("leases of a killed instance (PostgreSQL only: two processes share the database)", () => {
  const servers: ServerProcess[] = [];
  let db: pg.Client;
  let databaseUrl: string;

  async function start(): Promise<ServerProcess> {
    const server = await spawnServer({ DATABASE_URL: databaseUrl, DATABASE_POOL_SIZE: "4", JOB_POLL_MS: "200" });
    servers.push(server);
    return server;
  }

  beforeAll(async () => {
    databaseUrl = (await fileDatabaseUrl())!;
    db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
  });
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.kill()));
    await db?.end();
  });

  it("a capture whose instance was killed while it held the idempotency key: the retry on the other instance takes the key over and captures once", async () => {
    const [a, b] = await Promise.all([start(), start()]);
    const merchant = await newMerchant(a.url);
    const payment = await createPayment(a.url, merchant, { confirm: true, capture_method: "manual", payment_method_data: { card } });
    expect(payment.status).toBe("requires_capture");
    const key = "capture-killed-mid-flight";
    const capture = (url: string) =>
      rest(url, "POST", `/payments/${payment.payment_id}/capture`, {
        apiKey: merchant.apiKey,
        body: {},
        headers: { "x-idempotency-key": key },
      });

    // Hold the payment's row so the capture on `a` stops after claiming its key, then kill `a` there.
    const holder = new pg.Client({ connectionString: databaseUrl });
    await holder.connect();
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT 1 FROM payments WHERE payment_id = $1 FOR UPDATE", [payment.payment_id]);
      const lost = capture(a.url).then(
        () => "answered",
        () => "connection lost",
      );
      const [claimed] = await waitUntil(
        async () => {
          await sleep(20);
          return rows<{ state: string; locked_until: Date }>(
            db,
            "SELECT state, locked_until FROM idempotency_keys WHERE idempotency_key = $1",
            [key],
          );
        },
        (found) => found.length === 1,
      );
      expect(claimed!.state).toBe("in_flight");
      await a.kill();
      expect(await lost).toBe("connection lost");

      const retried = capture(b.url);
      // The retry waits for the row like the first attempt did (it holds the key now); let it through.
      await sleep(200);
      await holder.query("ROLLBACK");
      const res = await retried;
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.status).toBe("succeeded");
      // The key's first claim had most of its 60 s left: the retry did not wait for it.
      expect(Date.now()).toBeLessThan(claimed!.locked_until.getTime());
    } finally {
      await holder.end();
    }
    const replay = await capture(b.url);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.text).toContain(payment.payment_id);
    expect(await eventTypes(db, merchant, payment.payment_id)).toEqual(["payment.requires_capture", "payment.succeeded"]);
  }, 120_000);

  it("a payout job whose instance was killed while the bank answered: another instance sends it again at once, under the same attempt id, paid once", async () => {
    const first = await start();
    const merchant = await newMerchant(first.url);
    const created = await rest(first.url, "POST", "/payouts/create", {
      apiKey: merchant.apiKey,
      body: bankPayout(merchant, payoutAccounts.slow),
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const payoutId: string = created.body.payout_id;
    // The slow bank has booked the transfer and answers 2 s later: `first` is inside the call, its job leased for 60 s.
    await waitUntil(
      async () => {
        await sleep(20);
        return rows(
          db,
          "SELECT 1 FROM sandbox_payout_transfers t JOIN payouts p ON p.attempts->0->>'attempt_id' = t.idempotency_key WHERE p.payout_id = $1",
          [payoutId],
        );
      },
      (found) => found.length === 1,
      500,
    );
    await first.kill();
    const [job] = await rows<{ run_at: Date }>(db, "SELECT run_at FROM jobs WHERE object_id = $1 AND kind = 'payout.send'", [payoutId]);
    const leaseEnd = job!.run_at.getTime();

    const second = await start();
    const settled = await waitUntil(
      async () => {
        await sleep(100);
        return (await rest(second.url, "GET", `/payouts/${payoutId}`, { apiKey: merchant.apiKey })).body;
      },
      (payout) => payout.status !== "pending",
      400,
    );
    expect(settled.status).toBe("success");
    // Before the dead instance's lease ended.
    expect(Date.now()).toBeLessThan(leaseEnd);
    const [stored] = await rows<{ attempts: { attempt_id: string; status: string }[] }>(
      db,
      "SELECT attempts FROM payouts WHERE payout_id = $1",
      [payoutId],
    );
    expect(stored!.attempts).toHaveLength(1);
    const transfers = await rows<{ status: string }>(
      db,
      "SELECT outcome->>'status' AS status FROM sandbox_payout_transfers WHERE idempotency_key = $1",
      [stored!.attempts[0]!.attempt_id],
    );
    expect(transfers).toEqual([{ status: "succeeded" }]);
    expect(await eventTypes(db, merchant, payoutId)).toEqual(["payout.pending", "payout.success"]);
  }, 120_000);
});
