import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { visaCard as card } from "../support/cards.js";
import { type JsonBody, rest } from "../support/clients.js";
import { emptyDatabaseUrl, fileDatabaseUrl } from "../support/database.js";
import { newMerchant, type TestMerchant } from "../support/merchant.js";
import { createPayment } from "../support/payments.js";
import { payoutAccounts, payoutBodies } from "../support/payout-destinations.js";
import { type ServerProcess, spawnServer } from "../support/server-process.js";

/*
 * The backup and restore drill of docs/operations.md, as an operator runs it: pg_dump of a database
 * the service is using, pg_restore into an empty database, an instance started on the copy with the
 * same secrets. Everything a merchant had is there as it was, and still works: its key
 * authenticates, an idempotency key replays, an authorization captures, and a payout destination
 * stored encrypted is decrypted and paid.
 */

const run = promisify(execFile);

/** The newest PostgreSQL client binaries on this machine (Debian's postgresql package). */
function clientBinary(name: "pg_dump" | "pg_restore"): string {
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(path.join(root, v, "bin", name)))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) throw new Error(`no ${name} under ${root}/*/bin: install Debian's postgresql package (bash .ci/prepare does)`);
  return path.join(root, versions[0]!, "bin", name);
}

const servers: ServerProcess[] = [];
const scratch = mkdtempSync(path.join(tmpdir(), "backup-drill-"));
afterAll(async () => {
  await Promise.all(servers.map((server) => server.stop()));
  rmSync(scratch, { recursive: true, force: true });
});

async function startOn(databaseUrl: string): Promise<ServerProcess> {
  const server = await spawnServer({ DATABASE_URL: databaseUrl, JOB_POLL_MS: "200" });
  servers.push(server);
  return server;
}

async function post(url: string, merchant: TestMerchant, route: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await rest(url, "POST", route, { apiKey: merchant.apiKey, body, headers });
  expect(res.status, `${route}: ${JSON.stringify(res.body)}`).toBe(200);
  return res;
}

/** Everything the merchant can list, in the order the API lists it (up to 100 of each). */
async function everything(url: string, merchant: TestMerchant): Promise<Record<string, JsonBody[]>> {
  const lists: Record<string, JsonBody[]> = {};
  for (const resource of ["payments", "refunds", "payouts", "customers", "events"]) {
    const res = await rest(url, "GET", `/${resource}/list?limit=100`, { apiKey: merchant.apiKey });
    expect(res.status, `${resource}: ${JSON.stringify(res.body)}`).toBe(200);
    lists[resource] = res.body.data;
  }
  return lists;
}

describe("a backup taken with pg_dump while the service runs, restored with pg_restore", () => {
  it("serves every object as it was, and keys, idempotency keys, authorizations and encrypted payout destinations still work", async () => {
    const source = (await fileDatabaseUrl())!;
    const live = await startOn(source);
    const bodies = payoutBodies(() => new Date());
    const merchant = await newMerchant(live.url);

    const customer = await post(live.url, merchant, "/customers", { name: "Ada Lovelace", email: "ada@example.com" });
    const paid: string[] = [];
    for (let wave = 0; wave < 20; wave++) {
      const payments = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          createPayment(live.url, merchant, { amount: 1000 + wave * 10 + i, confirm: true, payment_method_data: { card } }),
        ),
      );
      for (const payment of payments) expect(payment.status).toBe("succeeded");
      paid.push(...payments.map((p) => p.payment_id));
    }
    for (const paymentId of paid.slice(0, 5)) {
      await post(live.url, merchant, "/refunds", { payment_id: paymentId, amount: 300, refund_type: "instant" });
    }
    const authorized = await createPayment(live.url, merchant, {
      amount: 5000,
      confirm: true,
      capture_method: "manual",
      customer_id: customer.body.customer_id,
      payment_method_data: { card },
    });
    expect(authorized.status).toBe("requires_capture");
    const keyed = await post(
      live.url,
      merchant,
      "/payments",
      { amount: 777, currency: "USD", profile_id: merchant.profileId, confirm: true, payment_method_data: { card } },
      { "idempotency-key": "drill-key-1" },
    );
    // Not confirmed: its bank account stays stored, encrypted with DATA_ENCRYPTION_KEY, until it is sent.
    const waiting = await post(
      live.url,
      merchant,
      "/payouts/create",
      bodies.bankPayout(merchant, payoutAccounts.succeeds, { confirm: false }),
    );
    expect(waiting.body.status).toBe("requires_fulfillment");
    const before = await everything(live.url, merchant);

    // Another merchant keeps paying while the backup is taken: the dump is one consistent snapshot.
    const busy = await newMerchant(live.url);
    let dumping = true;
    const acknowledged: string[] = [];
    const traffic = (async () => {
      while (dumping) {
        const payment = await createPayment(live.url, busy, { amount: 2500, confirm: true, payment_method_data: { card } });
        if (dumping) acknowledged.push(payment.payment_id);
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const acknowledgedAtDump = acknowledged.length;

    const dump = path.join(scratch, "payments.dump");
    const dumpStarted = performance.now();
    await run(clientBinary("pg_dump"), ["--format=custom", "--no-owner", `--file=${dump}`, source]);
    const dumpMs = performance.now() - dumpStarted;
    dumping = false;
    await traffic;
    const target = await emptyDatabaseUrl();
    const restoreStarted = performance.now();
    await run(clientBinary("pg_restore"), ["--no-owner", "--exit-on-error", `--dbname=${target}`, dump]);
    const restoreMs = performance.now() - restoreStarted;

    const restored = await startOn(target);
    expect(await everything(restored.url, merchant)).toEqual(before);
    for (const paymentId of acknowledged.slice(0, acknowledgedAtDump)) {
      const payment = await rest(restored.url, "GET", `/payments/${paymentId}`, { apiKey: busy.apiKey });
      expect(payment.body.status, paymentId).toBe("succeeded");
    }
    const replay = await post(
      restored.url,
      merchant,
      "/payments",
      { amount: 777, currency: "USD", profile_id: merchant.profileId, confirm: true, payment_method_data: { card } },
      { "idempotency-key": "drill-key-1" },
    );
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body.payment_id).toBe(keyed.body.payment_id);
    const captured = await post(restored.url, merchant, `/payments/${authorized.payment_id}/capture`, {});
    expect(captured.body.status).toBe("succeeded");
    const sent = await post(restored.url, merchant, `/payouts/${waiting.body.payout_id}/fulfill`, {});
    expect(["success", "pending"]).toContain(sent.body.status);
    const fresh = await createPayment(restored.url, merchant, { amount: 4242, confirm: true, payment_method_data: { card } });
    expect(fresh.status).toBe("succeeded");

    const objects = Object.values(before).reduce((n, list) => n + list.length, 0);
    console.log(
      `backup drill: ${paid.length} payments and ${objects} objects listed, ${acknowledgedAtDump} payments of another merchant acknowledged before the dump and found; pg_dump ${Math.round(dumpMs)} ms (${Math.round(statSync(dump).size / 1024)} KiB), ` +
        `pg_restore ${Math.round(restoreMs)} ms; restored instance answered every list as before`,
    );
  }, 240_000);
});
