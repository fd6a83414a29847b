import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { databaseClient } from "../../src/db/pool.js";
import { cardData } from "../support/cards.js";
import { rest } from "../support/clients.js";
import { fileDatabaseUrl, rows } from "../support/database.js";
import { newMerchant, type TestMerchant } from "../support/merchant.js";
import { spawnServer, type ServerProcess } from "../support/server-process.js";
import { until } from "../support/wait.js";

/*
 * Record first (src/payments/operation.ts), killed at each step. A server process spawned with
 * FAILPOINT set (src/failpoints.ts) SIGKILLs itself inside a payment operation: right after the
 * attempt is durably recorded, before the processor is called (`payment.recorded`), or right after
 * the processor answered, before the outcome is written (`payment.answered`). Another instance on the
 * same database then either finishes the attempt for the retry of the same API call (same
 * idempotency key), or, when nobody retries, settles it in its recovery upkeep, storing the outcome
 * as the key's answer for a retry that comes later. The retries go to an instance whose job runner
 * never runs in the test (JOB_POLL_MS of an hour), so its own recovery cannot settle an attempt
 * before the retry does; recovery is left to the other survivor. The sandbox
 * processor's books (sandbox_processor_calls) say what reached the processor: whatever happened, it
 * was asked once, and every authorization it granted belongs to a payment. A setup killed so saves
 * its card, and makes its mandate, exactly when recovery finds the processor verified the card.
 */

const failpoints = ["payment.recorded", "payment.answered"] as const;
type Failpoint = (typeof failpoints)[number];

/** How long recovery may take to settle an attempt nobody retries: it looks every second. */
const settleWithinMs = 30_000;

const instanceEnv = (databaseUrl: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
  DATABASE_URL: databaseUrl,
  DATABASE_POOL_SIZE: "4",
  RATE_LIMIT_PER_MINUTE: "1000000",
  REDIS_URL: "",
  ...extra,
});

/** A call the sandbox booked. */
interface BookedCall {
  readonly idempotency_key: string;
  readonly operation: string;
  readonly status: string | null;
  readonly reference: string | null;
}

/** A payment as stored. */
interface StoredPayment {
  readonly payment_id: string;
  readonly status: string;
  readonly amount: string;
  readonly amount_received: string | null;
  readonly processor_reference: string | null;
  readonly attempt: unknown;
}

describe("record first: an instance killed after recording an attempt or after the processor answered", () => {
  let db: pg.Client;
  let databaseUrl: string;
  /** The instance that answers retries; its job runner, and so its recovery, never runs here. */
  let retrier: ServerProcess;
  /**
   * The instance whose recovery (every second) settles what nobody retried, started by the first
   * case that needs it: the cases that retry at once run before, so no recovery can come first.
   */
  let recoverer: ServerProcess | undefined;
  async function recovering(): Promise<ServerProcess> {
    if (recoverer === undefined) {
      recoverer = await spawnServer(instanceEnv(databaseUrl));
      spawned.push(recoverer);
    }
    return recoverer;
  }
  const spawned: ServerProcess[] = [];

  beforeAll(async () => {
    databaseUrl = (await fileDatabaseUrl())!;
    db = databaseClient(databaseUrl);
    await db.connect();
    retrier = await spawnServer(instanceEnv(databaseUrl, { JOB_POLL_MS: "3600000" }));
    spawned.push(retrier);
  });
  afterAll(async () => {
    await Promise.all(spawned.map((server) => server.kill()));
    await db?.end();
  });

  /**
   * Sends one REST call to a fresh instance armed with `failpoint`, which must die in it: the call
   * fails with a connection error, and the process is gone.
   */
  async function killedCall(failpoint: Failpoint, merchant: TestMerchant, path: string, body: unknown, key: string): Promise<void> {
    // An attempt left unsettled would kill the armed instance in its own recovery, not in this call.
    expect(await rows(db, "SELECT payment_id FROM payments WHERE attempt IS NOT NULL")).toEqual([]);
    const armed = await spawnServer(instanceEnv(databaseUrl, { FAILPOINT: failpoint }));
    spawned.push(armed);
    const answer = await rest(armed.url, "POST", path, { apiKey: merchant.apiKey, body, headers: { "x-idempotency-key": key } }).then(
      (res) => `answered ${res.status}: ${res.text}`,
      (error: unknown) => error,
    );
    expect(answer, `the instance armed with ${failpoint} answered instead of dying`).toBeInstanceOf(Error);
    await until(`the instance armed with ${failpoint} exits`, () => !armed.running(), 10_000);
  }

  async function paymentsOf(merchant: TestMerchant): Promise<StoredPayment[]> {
    return rows<StoredPayment>(
      db,
      `SELECT payment_id, status, amount::text, amount_received::text, processor_reference, attempt
         FROM payments WHERE merchant_id = $1 ORDER BY created`,
      [merchant.merchantId],
    );
  }

  /** The sandbox's books for one payment: every call whose processor key is the payment's. */
  async function booksOf(merchant: TestMerchant, paymentId: string): Promise<BookedCall[]> {
    return rows<BookedCall>(
      db,
      `SELECT idempotency_key, operation, outcome->>'status' AS status, outcome->>'reference' AS reference
         FROM sandbox_processor_calls WHERE idempotency_key LIKE $1 ORDER BY created`,
      [`${merchant.merchantId}:${paymentId}:%`],
    );
  }

  async function eventTypesOf(merchant: TestMerchant, paymentId: string): Promise<string[]> {
    const events = await rows<{ type: string }>(db, "SELECT type FROM events WHERE merchant_id = $1 AND object_id = $2 ORDER BY seq", [
      merchant.merchantId,
      paymentId,
    ]);
    return events.map((e) => e.type);
  }

  /** A manual capture killed after the processor answered, retried with its key at once or once recovery settled it. */
  async function killedCapture(when: "at once" | "after recovery settled it"): Promise<void> {
    const merchant = await newMerchant(retrier.url);
    const created = await rest(retrier.url, "POST", "/payments", {
      apiKey: merchant.apiKey,
      body: { ...automatic(merchant, 7300), capture_method: "manual" },
      headers: { "x-idempotency-key": "capture-create" },
    });
    expect(created.status, created.text).toBe(200);
    expect(created.body.status).toBe("requires_capture");
    const paymentId: string = created.body.payment_id;
    const path = `/payments/${paymentId}/capture`;
    const key = "capture-retried";
    await killedCall("payment.answered", merchant, path, {}, key);
    if (when === "after recovery settled it") {
      await recovering();
      await until(
        `recovery settles the capture of ${paymentId}`,
        async () => (await paymentsOf(merchant))[0]!.attempt === null,
        settleWithinMs,
        100,
      );
    }

    const retry = await rest(retrier.url, "POST", path, { apiKey: merchant.apiKey, body: {}, headers: { "x-idempotency-key": key } });
    expect(retry.status, retry.text).toBe(200);
    expect(retry.body).toMatchObject({ payment_id: paymentId, status: "succeeded" });
    expect(retry.headers.get("idempotent-replayed")).toBe(when === "at once" ? null : "true");

    const [payment] = await paymentsOf(merchant);
    expect(payment).toMatchObject({ status: "succeeded", attempt: null, amount_received: "7300" });
    const books = await booksOf(merchant, paymentId);
    const captures = books.filter((c) => c.operation === "capture");
    expect(captures, JSON.stringify(books)).toHaveLength(1);
    expect(captures[0]!.idempotency_key.startsWith(`${merchant.merchantId}:${paymentId}:capture:`)).toBe(true);
    expect(captures[0]!.status).toBe("succeeded");
    expect(books.filter((c) => c.operation === "authorize")).toHaveLength(1);
    const events = await eventTypesOf(merchant, paymentId);
    expect(
      events.filter((type) => type === "payment.succeeded"),
      JSON.stringify(events),
    ).toHaveLength(1);
  }

  const automatic = (merchant: TestMerchant, amount: number) => ({
    amount,
    currency: "USD",
    profile_id: merchant.profileId,
    confirm: true,
    capture_method: "automatic",
    payment_method_data: cardData("4242424242424242", new Date()),
  });

  it.each(failpoints)(
    "a create with confirm killed at %s and retried with its key on another instance: one payment, authorized once, succeeded",
    async (failpoint) => {
      const merchant = await newMerchant(retrier.url);
      const body = automatic(merchant, 4200);
      const key = `create-retried-${failpoint}`;
      await killedCall(failpoint, merchant, "/payments", body, key);

      const retry = await rest(retrier.url, "POST", "/payments", { apiKey: merchant.apiKey, body, headers: { "x-idempotency-key": key } });
      expect(retry.status, retry.text).toBe(200);
      expect(retry.body.status).toBe("succeeded");

      const payments = await paymentsOf(merchant);
      expect(payments.map((p) => p.payment_id)).toEqual([retry.body.payment_id]);
      const [payment] = payments as [StoredPayment];
      expect(payment).toMatchObject({ status: "succeeded", attempt: null, amount_received: "4200" });

      const books = await booksOf(merchant, payment.payment_id);
      const authorizations = books.filter((c) => c.operation === "authorize");
      expect(authorizations, JSON.stringify(books)).toHaveLength(1);
      expect(authorizations[0]!.idempotency_key.startsWith(`${merchant.merchantId}:${payment.payment_id}:authorize:`)).toBe(true);
      expect(authorizations[0]).toMatchObject({ status: "captured", reference: payment.processor_reference });
      // The retry finished the attempt its first try recorded, with the processor key it recorded:
      // nothing else reached the processor.
      expect(books, JSON.stringify(books)).toHaveLength(1);
      const events = await eventTypesOf(merchant, payment.payment_id);
      expect(
        events.filter((type) => type === "payment.succeeded"),
        JSON.stringify(events),
      ).toHaveLength(1);
      expect(events).not.toContain("payment.processing");
    },
  );

  it("a scheduled-capture create killed at payment.recorded and retried with its key after capture_on passed: the recorded payment, captured by its job", async () => {
    const merchant = await newMerchant(retrier.url);
    // Ahead while an armed instance starts (seconds on a loaded machine) and takes the first try.
    const captureOn = new Date(Date.now() + 15_000);
    const body = { ...automatic(merchant, 6100), capture_method: "scheduled", capture_on: captureOn.toISOString() };
    const key = "create-scheduled-retried-late";
    await killedCall("payment.recorded", merchant, "/payments", body, key);
    // The retry comes once capture_on has passed, as one does after a database failover or a crash:
    // its first try recorded the payment, so it is not refused for it (a refusal freed the key, and
    // the next retry made a second payment; found by the failover test).
    await until("capture_on passed", () => Date.now() > captureOn.getTime() + 100, 30_000, 100);

    const retry = await rest(retrier.url, "POST", "/payments", { apiKey: merchant.apiKey, body, headers: { "x-idempotency-key": key } });
    expect(retry.status, retry.text).toBe(200);
    const payments = await paymentsOf(merchant);
    expect(payments.map((p) => p.payment_id)).toEqual([retry.body.payment_id]);
    await until(
      `the scheduled capture of ${retry.body.payment_id}`,
      async () => (await paymentsOf(merchant))[0]!.status === "succeeded",
      settleWithinMs,
      100,
    );
    const again = await rest(retrier.url, "POST", "/payments", { apiKey: merchant.apiKey, body, headers: { "x-idempotency-key": key } });
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body.payment_id).toBe(retry.body.payment_id);
  });

  it("a manual capture killed at payment.answered and retried with its key at once: captured once, succeeded", () =>
    killedCapture("at once"));

  it.each(failpoints)(
    "a create with confirm killed at %s and never retried: the surviving instance's recovery settles it with what the processor did",
    async (failpoint) => {
      const merchant = await newMerchant((await recovering()).url);
      const body = automatic(merchant, 5100);
      const key = `create-abandoned-${failpoint}`;
      await killedCall(failpoint, merchant, "/payments", body, key);

      // The payment was recorded (in processing, with its attempt) before the instance died.
      const [recorded, ...others] = await paymentsOf(merchant);
      expect(others).toEqual([]);
      const paymentId = recorded!.payment_id;
      let payment: StoredPayment | undefined;
      await until(
        `recovery settles the attempt of ${paymentId}`,
        async () => {
          [payment] = await paymentsOf(merchant);
          return payment!.attempt === null;
        },
        settleWithinMs,
        100,
      );

      const books = await booksOf(merchant, paymentId);
      const events = await eventTypesOf(merchant, paymentId);
      expect(events).not.toContain("payment.processing");
      if (failpoint === "payment.recorded") {
        // The processor never received the authorization: its key is recalled (refused from now on),
        // and the payment waits for a payment method.
        expect(payment!.status).toBe("requires_payment_method");
        expect(books, JSON.stringify(books)).toHaveLength(1);
        expect(books[0]!.operation).toBe("recalled");
        expect(books[0]!.idempotency_key.startsWith(`${merchant.merchantId}:${paymentId}:authorize:`)).toBe(true);
        expect(events.at(-1)).toBe("payment.requires_payment_method");
      } else {
        // The processor authorized and captured: the payment says so, with the processor's reference.
        expect(payment).toMatchObject({ status: "succeeded", amount_received: "5100" });
        expect(books, JSON.stringify(books)).toHaveLength(1);
        expect(books[0]).toMatchObject({ operation: "authorize", status: "captured", reference: payment!.processor_reference });
        expect(books[0]!.idempotency_key.startsWith(`${merchant.merchantId}:${paymentId}:authorize:`)).toBe(true);
        expect(
          events.filter((type) => type === "payment.succeeded"),
          JSON.stringify(events),
        ).toHaveLength(1);
      }

      // A retry that comes after recovery replays the outcome recovery stored as the key's answer.
      const late = await rest(retrier.url, "POST", "/payments", { apiKey: merchant.apiKey, body, headers: { "x-idempotency-key": key } });
      expect(late.status, late.text).toBe(200);
      expect(late.headers.get("idempotent-replayed")).toBe("true");
      expect(late.body).toMatchObject({ payment_id: paymentId, status: payment!.status });
      expect(await booksOf(merchant, paymentId)).toEqual(books);
    },
  );

  it.each(failpoints)(
    "an off-session setup killed at %s and never retried: recovery saves the card with its mandate when the processor verified it, and nothing when it never asked",
    async (failpoint) => {
      const merchant = await newMerchant((await recovering()).url);
      const customer = await rest(retrier.url, "POST", "/customers", { apiKey: merchant.apiKey, body: {} });
      const customerId: string = customer.body.customer_id;
      const body = {
        ...automatic(merchant, 0),
        customer_id: customerId,
        setup_future_usage: "off_session",
        customer_acceptance: { acceptance_type: "offline" },
      };
      await killedCall(failpoint, merchant, "/payments", body, `setup-abandoned-${failpoint}`);

      // Recorded with its attempt, and with the card pending on it, before the instance died.
      const [recorded] = await paymentsOf(merchant);
      const pending = await rows<{ payment_method_id: string; pending_payment_id: string }>(
        db,
        "SELECT payment_method_id, pending_payment_id FROM payment_methods WHERE merchant_id = $1",
        [merchant.merchantId],
      );
      expect(pending).toEqual([{ payment_method_id: expect.stringMatching(/^pm_/), pending_payment_id: recorded!.payment_id }]);
      await until(
        `recovery settles the setup ${recorded!.payment_id}`,
        async () => (await paymentsOf(merchant))[0]!.attempt === null,
        settleWithinMs,
        100,
      );

      const setup = await rest(retrier.url, "GET", `/payments/${recorded!.payment_id}`, { apiKey: merchant.apiKey });
      const saved = await rest(retrier.url, "GET", `/customers/${customerId}/payment_methods`, { apiKey: merchant.apiKey });
      const mandates = await rest(retrier.url, "GET", `/customers/${customerId}/mandates`, { apiKey: merchant.apiKey });
      if (failpoint === "payment.recorded") {
        expect(setup.body).toMatchObject({ status: "requires_payment_method", mandate_id: null });
        expect(saved.body.total_count).toBe(0);
        expect(mandates.body.total_count).toBe(0);
      } else {
        expect(setup.body).toMatchObject({ status: "succeeded", payment_method_id: pending[0]!.payment_method_id });
        expect(saved.body.data.map((m: { payment_method_id: string }) => m.payment_method_id)).toEqual([pending[0]!.payment_method_id]);
        expect(mandates.body.data).toEqual([
          expect.objectContaining({
            mandate_id: setup.body.mandate_id,
            status: "active",
            payment_method_id: pending[0]!.payment_method_id,
          }),
        ]);
      }
    },
  );

  it("a manual capture killed at payment.answered and retried once recovery settled it: the stored outcome, captured once", () =>
    killedCapture("after recovery settled it"));

  it("the books, over every case: no authorization the processor granted without its payment, no payment authorized twice", async () => {
    const granted = await rows<{ idempotency_key: string; reference: string; payment_id: string | null }>(
      db,
      `SELECT c.idempotency_key, c.outcome->>'reference' AS reference, p.payment_id
         FROM sandbox_processor_calls c
         LEFT JOIN payments p ON p.processor_reference = c.outcome->>'reference'
          AND p.merchant_id = split_part(c.idempotency_key, ':', 1) AND p.payment_id = split_part(c.idempotency_key, ':', 2)
        WHERE c.operation = 'authorize' AND c.outcome->>'status' IN ('authorized', 'captured')`,
    );
    // Seven cases were granted an authorization: the two retried creates, the scheduled-capture create
    // retried late, the create and the setup settled after the answer, the two manual captures'
    // payments (the create and the setup settled after the record were never authorized).
    expect(granted, JSON.stringify(granted)).toHaveLength(7);
    const twice = await rows<{ payment: string; n: number }>(
      db,
      `SELECT split_part(idempotency_key, ':', 1) || ':' || split_part(idempotency_key, ':', 2) AS payment, count(*)::int AS n
         FROM sandbox_processor_calls
        WHERE operation = 'authorize' AND outcome->>'status' IN ('authorized', 'captured')
        GROUP BY 1 HAVING count(*) > 1`,
    );
    expect({ withoutPayment: granted.filter((g) => g.payment_id === null), twice }).toEqual({ withoutPayment: [], twice: [] });
  });
});
