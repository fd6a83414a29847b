import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PayoutProcessor } from "../src/processors/processor.js";
import { rest, type JsonBody } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { fileDatabaseUrl, onPostgres, rows, type Sql } from "./support/database.js";
import { expectRestError } from "./support/errors.js";
import { eventTypes } from "./support/events.js";
import { newMerchant, type TestMerchant } from "./support/merchant.js";
import { payoutAccounts as accounts, payoutBodies, payoutCards as cards } from "./support/payout-destinations.js";
import { deadlocks, summary } from "./support/races.js";
import { instancePair } from "./support/running.js";
import { spawnServer, type ServerProcess } from "./support/server-process.js";
import { noPolling } from "./support/service.js";
import { waitUntil } from "./support/wait.js";

/*
 * Payout durability and races (issue #5: "kill the server mid-processing and restart it — every
 * payout still reaches a final status, none is paid twice", "two concurrent operations can never
 * both win", failover between processors). Sending is a leased job with a committed pending attempt
 * before each processor call and a committed outcome after it; a pending attempt is re-sent under
 * the same attempt id, which the processor takes as its idempotency key. The sandbox rails keep
 * their books in sandbox_payout_transfers, keyed by (rail, idempotency_key): a row is money moved
 * (or refused) by a rail, so "paid twice" would show there as a second succeeded transfer.
 *
 * First the real server runs as a child process and is SIGKILLed while a slow bank (000999999991:
 * it books the transfer, then answers 2 s later) has the money but the service has not recorded
 * the answer; a fresh server on the same database takes over once the sandbox clock has moved past
 * the 60 s lease. Then two in-process instances share one database and race: both job runners
 * sending many payouts, fulfill against cancel, a lease running out while the first sender still
 * waits for the bank. The embedded database serializes every statement, so these races only exist
 * on real PostgreSQL: everything here is skipped without DATABASE_URL.
 */

/** How long a sending job is leased (src/payouts/jobs.ts): a dead instance's job is due again after it. */
const leaseSeconds = 60;

const { bankPayout, cardPayout } = payoutBodies(() => new Date());

async function createPayout(url: string, merchant: TestMerchant, body: Record<string, unknown>): Promise<JsonBody> {
  const res = await rest(url, "POST", "/payouts/create", { apiKey: merchant.apiKey, body });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

/** Every payout of a merchant, through the list API (one page of up to 100). */
async function payoutsOf(url: string, merchant: TestMerchant): Promise<JsonBody[]> {
  const res = await rest(url, "POST", "/payouts/list", { apiKey: merchant.apiKey, body: { limit: 100 } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.has_more).toBe(false);
  return res.body.data;
}

const isFinal = (status: string) => status === "success" || status === "failed" || status === "cancelled";

/** One row of the sandbox rails' books. */
interface Transfer {
  rail: string;
  idempotency_key: string;
  status: "succeeded" | "declined";
  reference: string;
}

/** The books' rows for these idempotency keys (attempt ids), on any rail. */
function transfersFor(db: Sql, keys: readonly string[]): Promise<Transfer[]> {
  return rows<Transfer>(
    db,
    `SELECT rail, idempotency_key, outcome->>'status' AS status, outcome->>'reference' AS reference
       FROM sandbox_payout_transfers WHERE idempotency_key = ANY($1) ORDER BY created, rail`,
    [keys],
  );
}

/** A payout as stored, attempts with their processor references (the API does not show them). */
interface StoredPayout {
  payout_id: string;
  status: string;
  attempts: { attempt_id: string; processor: string; status: string; processor_reference?: string; error_code?: string; created: string }[];
}

function storedPayouts(db: Sql, merchant: TestMerchant): Promise<StoredPayout[]> {
  return rows<StoredPayout>(db, "SELECT payout_id, status, attempts FROM payouts WHERE merchant_id = $1 ORDER BY payout_id", [
    merchant.merchantId,
  ]);
}

/** payout.send jobs still stored for a merchant. */
async function sendJobs(db: Sql, merchant: TestMerchant): Promise<{ object_id: string; run_at: Date; attempts: number }[]> {
  return rows(db, "SELECT object_id, run_at, attempts FROM jobs WHERE kind = 'payout.send' AND merchant_id = $1", [merchant.merchantId]);
}

/** Checks a final payout against the books: one transfer per attempt, on the attempt's rail and with its outcome; one succeeded transfer when it succeeded, none otherwise. */
async function expectBooksMatch(db: Sql, payout: StoredPayout): Promise<Transfer[]> {
  const ids = payout.attempts.map((a) => a.attempt_id);
  expect(new Set(ids).size, `${payout.payout_id}: distinct attempt ids`).toBe(ids.length);
  const transfers = await transfersFor(db, ids);
  const context = `${payout.payout_id} ${payout.status}: attempts ${JSON.stringify(payout.attempts)}, books ${JSON.stringify(transfers)}`;
  expect(transfers.map((t) => t.idempotency_key).sort(), context).toEqual([...ids].sort());
  for (const attempt of payout.attempts) {
    const transfer = transfers.find((t) => t.idempotency_key === attempt.attempt_id)!;
    expect(transfer.rail, context).toBe(attempt.processor);
    expect(transfer.status, context).toBe(attempt.status === "success" ? "succeeded" : "declined");
    // What the service recorded is the bank's one answer to that key.
    expect(attempt.processor_reference, context).toBe(transfer.reference);
  }
  expect(
    transfers.filter((t) => t.status === "succeeded"),
    context,
  ).toHaveLength(payout.status === "success" ? 1 : 0);
  return transfers;
}

/** The servers this file started, killed after its tests in case a failed test left one running. */
const servers: ServerProcess[] = [];

/** The real server on the file's database, with the sandbox test clock and a quick job poll. */
async function startServer(databaseUrl: string): Promise<ServerProcess> {
  const server = await spawnServer({ DATABASE_URL: databaseUrl, DATABASE_POOL_SIZE: "4", SANDBOX_TEST_CLOCK: "true", JOB_POLL_MS: "200" });
  servers.push(server);
  return server;
}

describe.skipIf(!onPostgres)("payouts on PostgreSQL (PostgreSQL only: the embedded database serializes)", () => {
  describe("a server killed mid-processing", () => {
    let db: pg.Client;
    let databaseUrl: string;

    beforeAll(async () => {
      databaseUrl = (await fileDatabaseUrl())!;
      db = new pg.Client({ connectionString: databaseUrl });
      await db.connect();
    });
    afterAll(async () => {
      await Promise.all(servers.map((server) => server.kill()));
      await db?.end();
    });

    it("SIGKILL while the bank has the money but the answer is not recorded: after a restart every payout is success, none paid twice", async () => {
      const first = await startServer(databaseUrl);
      const merchant = await newMerchant(first.url);
      const count = 8;
      const created = await Promise.all(
        Array.from({ length: count }, () => createPayout(first.url, merchant, bankPayout(merchant, accounts.slow))),
      );
      for (const payout of created) expect(payout).toMatchObject({ status: "pending", processor: "sandbox_ach", attempts: [] });

      // The slow bank has booked a transfer whose payout is still pending: the server is inside the processor call.
      const inFlightAtKill = await waitUntil(
        async () => {
          await sleep(20);
          return rows<{ payout_id: string; attempt_id: string }>(
            db,
            `SELECT p.payout_id, t.idempotency_key AS attempt_id FROM payouts p
               JOIN sandbox_payout_transfers t ON p.attempts @> jsonb_build_array(jsonb_build_object('attempt_id', t.idempotency_key))
              WHERE p.merchant_id = $1 AND p.status = 'pending'`,
            [merchant.merchantId],
          );
        },
        (found) => found.length > 0,
        500,
      );
      await first.kill();

      // At the kill: some payouts pending; the in-flight one has its attempt committed as pending, the
      // bank's transfer booked (succeeded) and its job leased for 60 s.
      const atKill = await storedPayouts(db, merchant);
      expect(atKill).toHaveLength(count);
      const pendingAtKill = atKill.filter((p) => p.status === "pending");
      expect(pendingAtKill.length).toBeGreaterThan(0);
      const inFlight = pendingAtKill.filter((p) => p.attempts.some((a) => a.status === "pending"));
      expect(inFlight.map((p) => p.payout_id)).toEqual(expect.arrayContaining(inFlightAtKill.map((r) => r.payout_id)));
      const interrupted = new Map<string, { attemptId: string; reference: string }>();
      for (const payout of inFlight) {
        expect(payout.attempts, payout.payout_id).toHaveLength(1);
        const attempt = payout.attempts[0]!;
        expect(attempt).toMatchObject({ processor: "sandbox_ach", status: "pending" });
        expect(attempt.processor_reference).toBeUndefined();
        const booked = await transfersFor(db, [attempt.attempt_id]);
        if (booked.length === 1) {
          expect(booked[0]).toMatchObject({ rail: "sandbox_ach", status: "succeeded" });
          interrupted.set(payout.payout_id, { attemptId: attempt.attempt_id, reference: booked[0]!.reference });
        }
      }
      expect(interrupted.size, JSON.stringify(atKill)).toBeGreaterThan(0);
      const jobsAtKill = await sendJobs(db, merchant);
      for (const [payoutId, { attemptId }] of interrupted) {
        const job = jobsAtKill.find((j) => j.object_id === payoutId);
        expect(job, `the job of ${payoutId} is still there`).toBeDefined();
        const attemptCreated = Date.parse(
          inFlight.find((p) => p.payout_id === payoutId)!.attempts.find((a) => a.attempt_id === attemptId)!.created,
        );
        const leasedFor = job!.run_at.getTime() - attemptCreated;
        expect(leasedFor).toBeGreaterThan((leaseSeconds - 5) * 1000);
        expect(leasedFor).toBeLessThanOrEqual(leaseSeconds * 1000);
      }

      // A fresh server on the same database; the sandbox clock moves past the lease so the dead server's job is due.
      const second = await startServer(databaseUrl);
      try {
        const moved = await rest(second.url, "POST", "/sandbox/clock/advance", { admin: true, body: { seconds: leaseSeconds + 1 } });
        expect(moved.status, JSON.stringify(moved.body)).toBe(200);
        const settled = await waitUntil(
          async () => {
            await sleep(100);
            return payoutsOf(second.url, merchant);
          },
          (payouts) => payouts.every((p) => isFinal(p.status)),
          300,
        );
        expect(settled.map((p) => p.status)).toEqual(Array(count).fill("success"));
      } finally {
        await second.stop();
      }
      // Taking over needed no retry: no job failed on the restarted server.
      expect(
        second
          .output()
          .split("\n")
          .filter((line) => line.includes('"level":"error"')),
      ).toEqual([]);

      const final = await storedPayouts(db, merchant);
      let transfers = 0;
      for (const payout of final) {
        expect(payout.status).toBe("success");
        // Each payout went out once: one attempt, one transfer, the bank's first answer recorded.
        expect(payout.attempts, payout.payout_id).toHaveLength(1);
        expect(payout.attempts[0]).toMatchObject({ processor: "sandbox_ach", status: "success" });
        transfers += (await expectBooksMatch(db, payout)).length;
        expect(await eventTypes(db, merchant, payout.payout_id)).toEqual(["payout.pending", "payout.success"]);
      }
      expect(transfers).toBe(count);
      // The interrupted attempt was sent again under the same id and got the answer the bank gave before the kill.
      for (const [payoutId, { attemptId, reference }] of interrupted) {
        const payout = final.find((p) => p.payout_id === payoutId)!;
        expect(payout.attempts).toEqual([
          expect.objectContaining({ attempt_id: attemptId, status: "success", processor_reference: reference }),
        ]);
      }
      expect(await sendJobs(db, merchant)).toEqual([]);
      const [pending] = await rows<{ n: number }>(db, "SELECT count(*)::int AS n FROM jobs WHERE kind = 'payout.send'");
      expect(pending?.n).toBe(0);
    }, 60_000);
  });

  describe("two instances on one database", () => {
    const clock = new TestClock();
    // Polling off: a create or fulfill still wakes its instance's runner, and the tests run due jobs on both.
    // Two single instances whatever the topology: the tests watch which instance's rails each call
    // went through, and count every call; instances behind a load balancer would go unwatched.
    const { a, b, instance } = instancePair(noPolling, clock);
    /** Every processor call either instance made, and whether it has answered. */
    const calls: { instance: "a" | "b"; rail: string; key: string; answered: boolean }[] = [];

    /** Records the calls of an instance's rails; each call takes a moment, so one runner cannot drain every job before the other wakes. */
    function watchRails(rails: readonly PayoutProcessor[], name: "a" | "b"): void {
      for (const rail of rails) {
        const send = rail.payout.bind(rail);
        rail.payout = async (request) => {
          const call = { instance: name, rail: rail.name, key: request.idempotencyKey, answered: false };
          calls.push(call);
          await sleep(5);
          try {
            return await send(request);
          } finally {
            call.answered = true;
          }
        };
      }
    }

    /** Runs due jobs on both instances until every payout of the merchant is final. */
    async function settle(merchant: TestMerchant): Promise<JsonBody[]> {
      return waitUntil(
        async () => {
          await Promise.all([a.jobs.runDue(), b.jobs.runDue()]);
          return payoutsOf(instance(1).url, merchant);
        },
        (payouts) => payouts.every((p) => isFinal(p.status)),
      );
    }

    async function transferCount(): Promise<number> {
      const [row] = await rows<{ n: number }>(a.app.dataSource, "SELECT count(*)::int AS n FROM sandbox_payout_transfers");
      return row!.n;
    }

    beforeAll(() => {
      watchRails(a.app.processors.sandboxPayoutRails, "a");
      watchRails(b.app.processors.sandboxPayoutRails, "b");
    });

    it("90 payouts sent by both runners at once, with failovers and declines: each ends final once, paid at most once", async () => {
      const merchant = await newMerchant(a.url);
      const deadlocksBefore = await deadlocks(a);
      const transfersBefore = await transferCount();
      const callsBefore = calls.length;
      /** Destination, final status and the rails of its attempts, in order. */
      const kinds: [Record<string, unknown>, string, string[]][] = [
        [bankPayout(merchant, accounts.succeeds), "success", ["sandbox_ach"]],
        [bankPayout(merchant, accounts.achUnavailable), "success", ["sandbox_ach", "sandbox_swift"]],
        [cardPayout(merchant, cards.instantFails, { priority: "fast" }), "success", ["sandbox_instant", "sandbox_card"]],
        [cardPayout(merchant, cards.succeeds), "success", ["sandbox_card"]],
        [bankPayout(merchant, accounts.closed), "failed", ["sandbox_ach"]],
        [bankPayout(merchant, accounts.allUnavailable), "failed", ["sandbox_ach", "sandbox_swift"]],
        [cardPayout(merchant, cards.declined, { priority: "fast" }), "failed", ["sandbox_instant"]],
      ];
      // More than one claim of a runner takes (64 jobs): with fewer, whichever runner woke first
      // could claim every job at once and leave the other nothing to race for. At most one page of
      // the list (100) that payoutsOf reads.
      const count = 90;
      const created = await Promise.all(
        Array.from({ length: count }, async (_, i) => {
          const [body, status, rails] = kinds[i % kinds.length]!;
          const payout = await createPayout(instance(i).url, merchant, { ...body, metadata: { n: String(i) } });
          return { payoutId: payout.payout_id as string, status, rails };
        }),
      );

      const settled = await settle(merchant);
      expect(settled).toHaveLength(count);
      const stored = await storedPayouts(a.app.dataSource, merchant);
      let attempts = 0;
      for (const { payoutId, status, rails } of created) {
        const payout = stored.find((p) => p.payout_id === payoutId)!;
        const context = JSON.stringify(payout);
        expect(payout.status, context).toBe(status);
        expect(
          payout.attempts.map((at) => at.processor),
          context,
        ).toEqual(rails);
        // Every attempt but the last failed retryably (a failover); the last one decided.
        for (const attempt of payout.attempts.slice(0, -1)) expect(attempt.status, context).toBe("failed");
        expect(payout.attempts.at(-1)!.status, context).toBe(status);
        await expectBooksMatch(a.app.dataSource, payout);
        attempts += payout.attempts.length;
        expect(await eventTypes(b.app.dataSource, merchant, payoutId)).toEqual(["payout.pending", `payout.${status}`].sort());
      }
      // Nothing was sent that no attempt accounts for, and each attempt was sent once (no lease ran out here).
      expect(await transferCount()).toBe(transfersBefore + attempts);
      const made = calls.slice(callsBefore);
      expect(made).toHaveLength(attempts);
      expect(new Set(made.map((c) => c.key)).size).toBe(attempts);
      expect(new Set(made.map((c) => c.instance)), "both runners sent payouts").toEqual(new Set(["a", "b"]));
      expect(await sendJobs(a.app.dataSource, merchant)).toEqual([]);
      expect(await deadlocks(a)).toBe(deadlocksBefore);
    });

    it("failover to the next processor: two attempts with distinct ids, one transfer on each rail", async () => {
      const merchant = await newMerchant(a.url);
      const bank = await createPayout(a.url, merchant, bankPayout(merchant, accounts.achUnavailable));
      const card = await createPayout(b.url, merchant, cardPayout(merchant, cards.instantFails, { priority: "fast" }));
      const none = await createPayout(a.url, merchant, bankPayout(merchant, accounts.allUnavailable));
      await settle(merchant);

      const check = async (
        payoutId: string,
        expected: { status: string; rails: [string, string]; firstError: string; lastError?: string },
      ) => {
        const res = await rest(b.url, "GET", `/payouts/${payoutId}`, { apiKey: merchant.apiKey });
        expect(res.status).toBe(200);
        const payout = res.body;
        expect(payout.status).toBe(expected.status);
        expect(payout.processor).toBe(expected.rails[1]);
        expect(payout.attempts).toHaveLength(2);
        const [first, second] = payout.attempts;
        expect(first).toMatchObject({ processor: expected.rails[0], status: "failed", error_code: expected.firstError });
        expect(second).toMatchObject({ processor: expected.rails[1], status: expected.status === "success" ? "success" : "failed" });
        expect(first.attempt_id).toMatch(/^att_/);
        expect(second.attempt_id).toMatch(/^att_/);
        expect(first.attempt_id).not.toBe(second.attempt_id);
        if (expected.lastError !== undefined) expect(payout).toMatchObject({ error_code: expected.lastError });
        const transfers = await transfersFor(a.app.dataSource, [first.attempt_id, second.attempt_id]);
        expect(transfers.map((t) => [t.rail, t.idempotency_key, t.status])).toEqual([
          [expected.rails[0], first.attempt_id, "declined"],
          [expected.rails[1], second.attempt_id, expected.status === "success" ? "succeeded" : "declined"],
        ]);
        const [storedPayout] = (await storedPayouts(a.app.dataSource, merchant)).filter((p) => p.payout_id === payoutId);
        await expectBooksMatch(a.app.dataSource, storedPayout!);
      };
      await check(bank.payout_id, { status: "success", rails: ["sandbox_ach", "sandbox_swift"], firstError: "processor_unavailable" });
      await check(card.payout_id, { status: "success", rails: ["sandbox_instant", "sandbox_card"], firstError: "processing_error" });
      await check(none.payout_id, {
        status: "failed",
        rails: ["sandbox_ach", "sandbox_swift"],
        firstError: "processor_unavailable",
        lastError: "processor_unavailable",
      });
    });

    it("fulfill vs cancel of a requires_fulfillment payout on two instances: exactly one wins, the other gets IR_16", async () => {
      const merchant = await newMerchant(a.url);
      const trials = 20;
      const held = await Promise.all(
        Array.from({ length: trials }, (_, i) =>
          createPayout(instance(i).url, merchant, bankPayout(merchant, accounts.succeeds, { confirm: false })),
        ),
      );
      for (const payout of held) expect(payout.status).toBe("requires_fulfillment");

      const raced = await Promise.all(
        held.map(async (payout, i) => {
          const [fulfill, cancel] = await Promise.all([
            rest(instance(i).url, "POST", `/payouts/${payout.payout_id}/fulfill`, { apiKey: merchant.apiKey }),
            rest(instance(i + 1).url, "POST", `/payouts/${payout.payout_id}/cancel`, { apiKey: merchant.apiKey }),
          ]);
          return { payoutId: payout.payout_id as string, fulfill, cancel };
        }),
      );
      await settle(merchant);

      const winners = { fulfill: 0, cancel: 0 };
      for (const { payoutId, fulfill, cancel } of raced) {
        const won = [fulfill, cancel].filter((r) => r.status === 200);
        expect(won, summary([fulfill, cancel])).toHaveLength(1);
        const fulfilled = won[0] === fulfill;
        winners[fulfilled ? "fulfill" : "cancel"]++;
        const lost = fulfilled ? cancel : fulfill;
        const message = expectRestError(lost, 400, "IR_16");
        expect(won[0]!.body).toMatchObject({ payout_id: payoutId, status: fulfilled ? "pending" : "cancelled" });
        // The loser saw the winner's status.
        expect(message).toContain(fulfilled ? "pending" : "cancelled");

        const res = await rest(instance(1).url, "GET", `/payouts/${payoutId}`, { apiKey: merchant.apiKey });
        const [payout] = (await storedPayouts(a.app.dataSource, merchant)).filter((p) => p.payout_id === payoutId);
        if (fulfilled) {
          expect(res.body).toMatchObject({ status: "success", processor: "sandbox_ach" });
          expect(payout!.attempts).toHaveLength(1);
          expect(await eventTypes(a.app.dataSource, merchant, payoutId)).toEqual([
            "payout.pending",
            "payout.requires_fulfillment",
            "payout.success",
          ]);
        } else {
          expect(res.body).toEqual(cancel.body);
          expect(payout!.attempts).toEqual([]);
          expect(await eventTypes(a.app.dataSource, merchant, payoutId)).toEqual(["payout.cancelled", "payout.requires_fulfillment"]);
        }
        await expectBooksMatch(a.app.dataSource, payout!);
      }
      expect(winners.fulfill + winners.cancel).toBe(trials);
      expect(await sendJobs(a.app.dataSource, merchant)).toEqual([]);
    });

    it("two fulfills (and two cancels) of one payout on two instances: exactly one 200", async () => {
      const merchant = await newMerchant(a.url);
      const trials = 20;
      const held = await Promise.all(
        Array.from({ length: trials }, (_, i) =>
          createPayout(instance(i).url, merchant, bankPayout(merchant, accounts.succeeds, { confirm: false })),
        ),
      );
      const action = (i: number) => (i < trials / 2 ? "fulfill" : "cancel");
      const raced = await Promise.all(
        held.map(async (payout, i) => {
          const responses = await Promise.all(
            [0, 1].map((side) =>
              rest(instance(i + side).url, "POST", `/payouts/${payout.payout_id}/${action(i)}`, { apiKey: merchant.apiKey }),
            ),
          );
          return { payoutId: payout.payout_id as string, responses };
        }),
      );
      await settle(merchant);

      for (const [i, { payoutId, responses }] of raced.entries()) {
        const won = responses.filter((r) => r.status === 200);
        expect(won, summary(responses)).toHaveLength(1);
        expectRestError(responses.find((r) => r.status !== 200)!, 400, "IR_16");
        const [payout] = (await storedPayouts(b.app.dataSource, merchant)).filter((p) => p.payout_id === payoutId);
        if (action(i) === "fulfill") {
          expect(won[0]!.body.status).toBe("pending");
          // One job, one attempt, one transfer.
          expect(payout).toMatchObject({ status: "success" });
          expect(payout!.attempts).toHaveLength(1);
          expect(await eventTypes(a.app.dataSource, merchant, payoutId)).toEqual([
            "payout.pending",
            "payout.requires_fulfillment",
            "payout.success",
          ]);
        } else {
          expect(won[0]!.body.status).toBe("cancelled");
          expect(payout).toMatchObject({ status: "cancelled", attempts: [] });
          expect(await eventTypes(a.app.dataSource, merchant, payoutId)).toEqual(["payout.cancelled", "payout.requires_fulfillment"]);
        }
        await expectBooksMatch(a.app.dataSource, payout!);
      }
    });

    it("a lease that runs out while the bank is still answering: the other instance re-sends the same attempt id, the bank pays once", async () => {
      const merchant = await newMerchant(a.url);
      const payout = await createPayout(a.url, merchant, bankPayout(merchant, accounts.slow));
      // Instance a's runner (woken by the create) is inside the slow bank's call: transfer booked, answer not yet recorded.
      const [transfer] = await waitUntil(
        async () => {
          await sleep(20);
          const [stored] = await storedPayouts(a.app.dataSource, merchant);
          return transfersFor(
            a.app.dataSource,
            stored!.attempts.map((at) => at.attempt_id),
          );
        },
        (found) => found.length === 1,
      );
      const firstCall = calls.find((c) => c.key === transfer!.idempotency_key)!;
      expect(firstCall).toMatchObject({ instance: "a", rail: "sandbox_ach", answered: false });

      // Past the lease, b takes the job over and sends the pending attempt again.
      clock.advance((leaseSeconds + 1) * 1000);
      expect(await b.jobs.runDue()).toBeGreaterThanOrEqual(1);
      const retried = calls.filter((c) => c.key === transfer!.idempotency_key);
      expect(retried.map((c) => [c.instance, c.rail, c.answered])).toEqual([
        ["a", "sandbox_ach", false],
        ["b", "sandbox_ach", true],
      ]);
      const afterTakeover = await rest(b.url, "GET", `/payouts/${payout.payout_id}`, { apiKey: merchant.apiKey });
      expect(afterTakeover.body).toMatchObject({
        status: "success",
        attempts: [{ attempt_id: transfer!.idempotency_key, status: "success" }],
      });

      // a's call answers at last; its outcome finds the payout final and changes nothing.
      await waitUntil(
        async () => {
          await sleep(50);
          return firstCall.answered;
        },
        (answered) => answered,
      );
      // Waits for the run a's runner is in (recording the outcome, deleting the job), then polls again.
      await a.jobs.stop();
      a.jobs.start();
      const [stored] = await storedPayouts(a.app.dataSource, merchant);
      expect(stored!.attempts).toEqual([
        expect.objectContaining({ attempt_id: transfer!.idempotency_key, status: "success", processor_reference: transfer!.reference }),
      ]);
      await expectBooksMatch(a.app.dataSource, stored!);
      expect(await eventTypes(a.app.dataSource, merchant, payout.payout_id)).toEqual(["payout.pending", "payout.success"]);
      const final = await rest(a.url, "GET", `/payouts/${payout.payout_id}`, { apiKey: merchant.apiKey });
      expect(final.body).toEqual(afterTakeover.body);
      expect(await sendJobs(a.app.dataSource, merchant)).toEqual([]);
    });
  });
});
