import { fromJson, toBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CustomerService } from "../gen/paymentservice/v1/customer_pb.js";
import { CreatePaymentRequestSchema, PaymentSchema, PaymentService } from "../gen/paymentservice/v1/payment_pb.js";
import { visaCard } from "./support/cards.js";
import { rest, type RestResponse, rpcClient, type RpcProtocol } from "./support/clients.js";
import { TestClock } from "./support/clock.js";
import { fileDatabaseUrl, onPostgres } from "./support/database.js";
import { expectExactRestError, expectRestError, expectRpcError } from "./support/errors.js";
import { issueKey, newMerchant, type TestMerchant } from "./support/merchant.js";
import { type Json, uniqueId } from "./support/resource-api.js";
import { runningService, servicePair } from "./support/running.js";
import { noPolling, type TestService } from "./support/service.js";
import { waitUntil } from "./support/wait.js";
import { settleLeftAttempts } from "../src/payments/operation.js";

/*
 * Idempotency keys (decisions §6, interface §8, docs/idempotency.md): `X-Idempotency-Key` (or
 * `Idempotency-Key`) on any call that changes something, over REST and as Connect/gRPC metadata.
 * The first completed response is replayed byte for byte with `Idempotent-Replayed: true` and
 * nothing runs again; the same key in flight is 409 IK_01, with another request 422 IK_02; failed
 * requests free their key; keys are scoped to merchant and environment and kept 24 hours.
 *
 * Effects are counted in the database (payments, refunds, payouts, customers, events of the
 * merchant), so "nothing ran" means no row anywhere. The service runs on a TestClock so the 24-hour
 * expiry and the 60-second claim lease can be crossed without waiting. The races between two
 * instances need real PostgreSQL (the embedded database serializes every statement) and are skipped
 * without DATABASE_URL.
 */

const visa = "4242424242424242";
const declined = "4000000000000002";
const amex = "378282246310005";
/** Amex takes a 4-digit CVC: distinctive enough to look for in stored bytes. */
const amexCvc = "7391";

const day = 24 * 60 * 60 * 1000;

/** Card fields of the 4242 card, or of `number` with `cvc`. */
function card(number = visa, cvc = "123"): Json {
  return { ...visaCard, card_number: number, card_cvc: cvc };
}

/** A confirmed card payment body (card 4242 unless told): the request retried in most tests. */
function paymentBody(merchant: TestMerchant, extra: Json = {}): Json {
  return {
    amount: 1000,
    currency: "USD",
    profile_id: merchant.profileId,
    confirm: true,
    payment_method_data: { card: card() },
    // Several keys, numeric ones included, so a replay must keep the map's order to be byte-identical.
    metadata: { order: "42", b: "2", a: "1", "10": "ten", "2": "two" },
    ...extra,
  };
}

/** Calls a REST path with an idempotency key, when one is given, in `keyHeader` (X-Idempotency-Key unless told). */
function send(
  url: string,
  method: string,
  path: string,
  options: { apiKey: string; body?: unknown; key?: string; keyHeader?: string },
): Promise<RestResponse> {
  const { apiKey, body, key, keyHeader = "X-Idempotency-Key" } = options;
  return rest(url, method, path, { apiKey, body, headers: key === undefined ? {} : { [keyHeader]: key } });
}

const replayed = (res: { headers: Headers }) => res.headers.get("idempotent-replayed");

/** A one-line account of racing answers for failure messages. */
function summary(responses: RestResponse[]): string {
  return responses.map((r) => `${r.status} ${r.body?.error?.code ?? (replayed(r) === "true" ? "replay" : "first")}`).join(", ");
}

/** Everything a merchant's calls can leave behind, counted in the database. */
async function effectsOf(service: TestService, merchantId: string): Promise<Record<string, number>> {
  const [row] = await service.app.dataSource.query(
    `SELECT (SELECT count(*) FROM payments WHERE merchant_id = $1)::int AS payments,
            (SELECT count(*) FROM refunds WHERE merchant_id = $1)::int AS refunds,
            (SELECT count(*) FROM payouts WHERE merchant_id = $1)::int AS payouts,
            (SELECT count(*) FROM customers WHERE merchant_id = $1)::int AS customers,
            (SELECT count(*) FROM api_keys WHERE merchant_id = $1)::int AS api_keys,
            (SELECT count(*) FROM events WHERE merchant_id = $1)::int AS events`,
    [merchantId],
  );
  return row;
}

/** The stored state of one key of a merchant (any environment), or undefined when there is none. */
async function keyRow(service: TestService, merchantId: string, key: string): Promise<{ state: string; livemode: boolean } | undefined> {
  const rows = await service.app.dataSource.query(
    "SELECT state, livemode FROM idempotency_keys WHERE merchant_id = $1 AND idempotency_key = $2",
    [merchantId, key],
  );
  return rows[0];
}

/** How many events are stored for one object. */
async function eventCount(service: TestService, merchantId: string, objectId: string): Promise<number> {
  const [row] = await service.app.dataSource.query("SELECT count(*)::int AS n FROM events WHERE merchant_id = $1 AND object_id = $2", [
    merchantId,
    objectId,
  ]);
  return row.n;
}

/** Asserts that `again` is a replay of `first`: same status, byte-identical body, the replay header (and not on the first). */
function expectReplayOf(again: RestResponse, first: RestResponse): void {
  expect(replayed(first)).toBeNull();
  expect({ status: again.status, replayed: replayed(again), text: again.text }).toEqual({
    status: first.status,
    replayed: "true",
    text: first.text,
  });
  expect(again.headers.get("content-type")).toBe(first.headers.get("content-type"));
}

describe("idempotency keys on one instance", () => {
  const clock = new TestClock();
  const service = runningService(noPolling, clock);

  const post = (merchant: TestMerchant, path: string, body: unknown, key?: string, keyHeader?: string) =>
    send(service.url, "POST", path, { apiKey: merchant.apiKey, body, key, keyHeader });

  describe("replay", () => {
    it("replays the first completed payment byte for byte with Idempotent-Replayed: true, and runs nothing: no payment, no event", async () => {
      const merchant = await newMerchant(service.url);
      const key = uniqueId("order");
      const first = await post(merchant, "/payments", paymentBody(merchant), key);
      expect(first.status, first.text).toBe(200);
      expect(first.body).toMatchObject({ status: "succeeded", amount: 1000 });
      const after = await effectsOf(service, merchant.merchantId);
      expect(after).toMatchObject({ payments: 1 });
      expect(after.events).toBeGreaterThan(0);

      for (let i = 0; i < 3; i++) {
        const again = await post(merchant, "/payments", paymentBody(merchant), key);
        expectReplayOf(again, first);
      }
      expect(await effectsOf(service, merchant.merchantId)).toEqual(after);
      expect(await keyRow(service, merchant.merchantId, key)).toEqual({ state: "completed", livemode: false });
    });

    it("takes the key from Idempotency-Key too: both header names name the same key", async () => {
      const merchant = await newMerchant(service.url);
      const key = uniqueId("alt");
      const first = await post(merchant, "/payments", paymentBody(merchant), key, "Idempotency-Key");
      expect(first.status, first.text).toBe(200);
      expectReplayOf(await post(merchant, "/payments", paymentBody(merchant), key, "Idempotency-Key"), first);
      expectReplayOf(await post(merchant, "/payments", paymentBody(merchant), key, "X-Idempotency-Key"), first);
      expect(await effectsOf(service, merchant.merchantId)).toMatchObject({ payments: 1 });
    });

    it("stores a declined payment as the completed answer it is (200, status failed): its retry is a replay, not a second attempt", async () => {
      const merchant = await newMerchant(service.url);
      const key = uniqueId("declined");
      const body = paymentBody(merchant, { payment_method_data: { card: card(declined) } });
      const first = await post(merchant, "/payments", body, key);
      expect(first.status).toBe(200);
      expect(first.body).toMatchObject({ status: "failed", error_code: "card_declined" });
      const after = await effectsOf(service, merchant.merchantId);
      expectReplayOf(await post(merchant, "/payments", body, key), first);
      expect(await effectsOf(service, merchant.merchantId)).toEqual(after);
    });

    it("accepts keys of 1 to 255 characters; 256 (or empty) is 400 IR_05 naming X-Idempotency-Key, under either header name, and nothing runs", async () => {
      const merchant = await newMerchant(service.url);
      const longest = `${"k".repeat(254)}!`;
      const first = await post(merchant, "/payments", paymentBody(merchant), longest);
      expect(first.status, first.text).toBe(200);
      expectReplayOf(await post(merchant, "/payments", paymentBody(merchant), longest), first);
      const one = await post(merchant, "/customers", { name: "one" }, "1");
      expect(one.status).toBe(200);
      expectReplayOf(await post(merchant, "/customers", { name: "one" }, "1"), one);

      const before = await effectsOf(service, merchant.merchantId);
      for (const [key, header] of [
        ["k".repeat(256), "X-Idempotency-Key"],
        ["k".repeat(256), "Idempotency-Key"],
        ["", "X-Idempotency-Key"],
      ] as const) {
        const res = await post(merchant, "/payments", paymentBody(merchant), key, header);
        expectExactRestError(res, 400, "IR_05", "X-Idempotency-Key");
      }
      await expectRpcError(
        rpcClient(PaymentService, service.url, "grpc", { apiKey: merchant.apiKey }).createPayment(rpcPayment(merchant), {
          headers: { "x-idempotency-key": "k".repeat(256) },
        }),
        Code.InvalidArgument,
        "IR_05",
      );
      expect(await effectsOf(service, merchant.merchantId)).toEqual(before);
    });

    it("ignores keys on reads (retrieve, list) and on admin calls: they answer as without a key", async () => {
      const merchant = await newMerchant(service.url);
      const key = uniqueId("read");
      const created = await post(merchant, "/payments", paymentBody(merchant), key);
      expect(created.status).toBe(200);

      const retrieved = await send(service.url, "GET", `/payments/${created.body.payment_id}`, { apiKey: merchant.apiKey, key });
      expect({ status: retrieved.status, replayed: replayed(retrieved), id: retrieved.body.payment_id }).toEqual({
        status: 200,
        replayed: null,
        id: created.body.payment_id,
      });
      const listed = await post(merchant, "/payments/list", { limit: 10 }, key);
      expect({ status: listed.status, replayed: replayed(listed), count: listed.body.total_count }).toEqual({
        status: 200,
        replayed: null,
        count: 1,
      });

      const adminKey = uniqueId("admin");
      const merchants = [];
      for (let i = 0; i < 2; i++) {
        const res = await rest(service.url, "POST", "/merchants", {
          admin: true,
          body: { merchant_name: "Same" },
          headers: { "X-Idempotency-Key": adminKey },
        });
        expect(res.status).toBe(200);
        expect(res.headers.get("idempotent-replayed")).toBeNull();
        merchants.push(res.body.merchant_id);
      }
      expect(new Set(merchants).size).toBe(2);
    });
  });

  describe("over Connect, gRPC and gRPC-Web (key in the request metadata)", () => {
    for (const protocol of ["connect", "grpc", "grpc-web"] as const satisfies readonly RpcProtocol[]) {
      it(`${protocol}: the retry returns the same message with Idempotent-Replayed: true, and only one payment exists`, async () => {
        const merchant = await newMerchant(service.url);
        const client = rpcClient(PaymentService, service.url, protocol, { apiKey: merchant.apiKey });
        const key = uniqueId(protocol);
        const headersSeen: Headers[] = [];
        const call = (headerName = "x-idempotency-key") =>
          client.createPayment(rpcPayment(merchant), { headers: { [headerName]: key }, onHeader: (h) => headersSeen.push(h) });

        const first = await call();
        expect(first.status).toBeGreaterThan(0);
        const after = await effectsOf(service, merchant.merchantId);
        const again = await call();
        const viaOtherName = await call("idempotency-key");
        expect(toBinary(PaymentSchema, again)).toEqual(toBinary(PaymentSchema, first));
        expect(toBinary(PaymentSchema, viaOtherName)).toEqual(toBinary(PaymentSchema, first));
        expect(headersSeen.map((h) => h.get("idempotent-replayed"))).toEqual([null, "true", "true"]);
        expect(await effectsOf(service, merchant.merchantId)).toEqual(after);
        expect(after.payments).toBe(1);
      });
    }

    it("a key is one key whatever the protocol: a REST create is replayed to a gRPC retry of the same request, and the other way round", async () => {
      const merchant = await newMerchant(service.url);
      const client = rpcClient(PaymentService, service.url, "grpc", { apiKey: merchant.apiKey });

      const restKey = uniqueId("rest-first");
      const overRest = await post(merchant, "/payments", paymentBody(merchant), restKey);
      expect(overRest.status).toBe(200);
      let header: Headers | undefined;
      const overGrpc = await client.createPayment(rpcPayment(merchant), {
        headers: { "x-idempotency-key": restKey },
        onHeader: (h) => (header = h),
      });
      expect(overGrpc.paymentId).toBe(overRest.body.payment_id);
      expect(overGrpc.amountReceived).toBe(1000n);
      expect(header?.get("idempotent-replayed")).toBe("true");

      const grpcKey = uniqueId("grpc-first");
      const created = await client.createPayment(rpcPayment(merchant), { headers: { "x-idempotency-key": grpcKey } });
      const replay = await post(merchant, "/payments", paymentBody(merchant), grpcKey);
      expect({ status: replay.status, replayed: replayed(replay), id: replay.body.payment_id }).toEqual({
        status: 200,
        replayed: "true",
        id: created.paymentId,
      });
      expect(await effectsOf(service, merchant.merchantId)).toMatchObject({ payments: 2 });
    });

    it("answers IK_02 over gRPC to the same key with another request (invalid_argument, the error detail)", async () => {
      const merchant = await newMerchant(service.url);
      const client = rpcClient(PaymentService, service.url, "grpc", { apiKey: merchant.apiKey });
      const key = uniqueId("grpc-mismatch");
      await client.createPayment(rpcPayment(merchant), { headers: { "x-idempotency-key": key } });
      await expectRpcError(
        client.createPayment(rpcPayment(merchant, { amount: 2000 }), { headers: { "x-idempotency-key": key } }),
        Code.InvalidArgument,
        "IK_02",
      );
      await expectRpcError(
        rpcClient(CustomerService, service.url, "connect", { apiKey: merchant.apiKey }).createCustomer(
          {},
          { headers: { "x-idempotency-key": key } },
        ),
        Code.InvalidArgument,
        "IK_02",
      );
      expect(await effectsOf(service, merchant.merchantId)).toMatchObject({ payments: 1, customers: 0 });
    });
  });

  describe("another request with the same key: 422 IK_02, nothing runs", () => {
    it("refuses another body, another path, another method and another path parameter; the original is still replayed", async () => {
      const merchant = await newMerchant(service.url);
      const key = uniqueId("cust");
      const first = await post(merchant, "/customers", { name: "Ada", email: "ada@example.com" }, key);
      expect(first.status, first.text).toBe(200);
      const customerId = first.body.customer_id as string;
      const before = await effectsOf(service, merchant.merchantId);

      const attempts: RestResponse[] = [
        await post(merchant, "/customers", { name: "Grace", email: "ada@example.com" }, key), // body
        await post(merchant, "/customers", { name: "Ada" }, key), // body (a field left out)
        await post(merchant, `/customers/${customerId}`, { name: "Grace" }, key), // path (update)
        await send(service.url, "DELETE", `/customers/${customerId}`, { apiKey: merchant.apiKey, key }), // method
        await post(merchant, "/payments", paymentBody(merchant), key), // another operation
      ];
      for (const res of attempts) {
        expectExactRestError(res, 422, "IK_02");
        expect(replayed(res)).toBeNull();
      }
      expect(await effectsOf(service, merchant.merchantId)).toEqual(before);
      const stored = await send(service.url, "GET", `/customers/${customerId}`, { apiKey: merchant.apiKey });
      expect(stored.body).toMatchObject({ customer_id: customerId, name: "Ada" });

      expectReplayOf(await post(merchant, "/customers", { name: "Ada", email: "ada@example.com" }, key), first);
    });

    it("counts path parameters as part of the request: cancelling another payment with the key is IK_02 and leaves it alone", async () => {
      const merchant = await newMerchant(service.url);
      const open = async () =>
        (await post(merchant, "/payments", { amount: 700, currency: "USD", profile_id: merchant.profileId })).body.payment_id as string;
      const [one, two] = [await open(), await open()];
      const key = uniqueId("cancel");
      const cancelled = await post(merchant, `/payments/${one}/cancel`, {}, key);
      expect(cancelled.body).toMatchObject({ payment_id: one, status: "cancelled" });
      expectRestError(await post(merchant, `/payments/${two}/cancel`, {}, key), 422, "IK_02");
      const other = await send(service.url, "GET", `/payments/${two}`, { apiKey: merchant.apiKey });
      expect(other.body.status).toBe("requires_payment_method");
      // Replaying a cancel is not an IR_16 "already cancelled": it is the first answer again.
      expectReplayOf(await post(merchant, `/payments/${one}/cancel`, {}, key), cancelled);
    });
  });

  describe("failed requests are not stored", () => {
    it("frees the key of a request refused by validation (IR_04, IR_05, HE_02): the corrected retry with the same key runs", async () => {
      const merchant = await newMerchant(service.url);
      const key = uniqueId("fix");
      const { amount: _amount, ...noAmount } = paymentBody(merchant);
      const refusals: [RestResponse, number, "IR_04" | "IR_05" | "HE_02"][] = [
        [await post(merchant, "/payments", noAmount, key), 400, "IR_04"],
        [await post(merchant, "/payments", paymentBody(merchant, { amount: -5 }), key), 400, "IR_05"],
        [await post(merchant, "/payments", paymentBody(merchant, { profile_id: "pro_doesnotexist" }), key), 404, "HE_02"],
        [
          await post(merchant, "/payments", paymentBody(merchant, { payment_method_data: { card: card("4000000000000077") } }), key),
          400,
          "IR_05",
        ],
      ];
      for (const [res, status, code] of refusals) {
        expectRestError(res, status, code);
        expect(await keyRow(service, merchant.merchantId, key)).toBeUndefined();
      }
      expect(await effectsOf(service, merchant.merchantId)).toMatchObject({ payments: 0, events: 0 });

      const corrected = await post(merchant, "/payments", paymentBody(merchant), key);
      expect({ status: corrected.status, replayed: replayed(corrected) }).toEqual({ status: 200, replayed: null });
      expect(corrected.body.status).toBe("succeeded");
      expectReplayOf(await post(merchant, "/payments", paymentBody(merchant), key), corrected);
      expect(await effectsOf(service, merchant.merchantId)).toMatchObject({ payments: 1 });
    });

    it("frees the key of a request that failed on the object's state (IR_16): after fixing the state the same request runs", async () => {
      const merchant = await newMerchant(service.url);
      const created = await post(merchant, "/payments", {
        amount: 900,
        currency: "USD",
        profile_id: merchant.profileId,
        capture_method: "manual",
      });
      const paymentId = created.body.payment_id as string;
      const key = uniqueId("capture");
      // Capture before confirmation: the wrong status.
      expectRestError(await post(merchant, `/payments/${paymentId}/capture`, {}, key), 400, "IR_14");
      expect(await keyRow(service, merchant.merchantId, key)).toBeUndefined();

      const confirmed = await post(merchant, `/payments/${paymentId}/confirm`, { payment_method_data: { card: card() } });
      expect(confirmed.body.status).toBe("requires_capture");
      const captured = await post(merchant, `/payments/${paymentId}/capture`, {}, key);
      expect({ status: captured.status, replayed: replayed(captured), payment: captured.body.status }).toEqual({
        status: 200,
        replayed: null,
        payment: "succeeded",
      });
      expectReplayOf(await post(merchant, `/payments/${paymentId}/capture`, {}, key), captured);
    });
  });

  describe("in flight: 409 IK_01", () => {
    it("answers IK_01 to the same request while the key's claim is held (its row as while the first request runs) and IK_02 to another; once the 60 s lease ends (the instance died before committing) the same request takes the key over", async () => {
      const merchant = await newMerchant(service.url);
      const key = uniqueId("inflight");
      const first = await post(merchant, "/payments", paymentBody(merchant), key);
      expect(first.status).toBe(200);
      // What a request still running (or one whose instance died before its commit) leaves: a claim, no response.
      await service.app.dataSource.query(
        `UPDATE idempotency_keys SET state = 'in_flight', response = NULL, locked_until = $3
         WHERE merchant_id = $1 AND idempotency_key = $2`,
        [merchant.merchantId, key, new Date(clock.now().getTime() + 60_000)],
      );
      const before = await effectsOf(service, merchant.merchantId);

      const busy = await post(merchant, "/payments", paymentBody(merchant), key);
      expectExactRestError(busy, 409, "IK_01");
      await expectRpcError(
        rpcClient(PaymentService, service.url, "grpc", { apiKey: merchant.apiKey }).createPayment(rpcPayment(merchant), {
          headers: { "x-idempotency-key": key },
        }),
        Code.Aborted,
        "IK_01",
      );
      expectRestError(await post(merchant, "/payments", paymentBody(merchant, { amount: 1001 }), key), 422, "IK_02");
      clock.advance(59_000);
      expectRestError(await post(merchant, "/payments", paymentBody(merchant), key), 409, "IK_01");
      expect(await effectsOf(service, merchant.merchantId)).toEqual(before);

      // Lease over: the same request runs (and another request still may not). What its first try
      // recorded is the payment it finds, under the id the key keeps for it: never a second payment.
      clock.advance(1_000);
      expectRestError(await post(merchant, "/payments", paymentBody(merchant, { amount: 1001 }), key), 422, "IK_02");
      const takenOver = await post(merchant, "/payments", paymentBody(merchant), key);
      expect({ status: takenOver.status, replayed: replayed(takenOver) }).toEqual({ status: 200, replayed: null });
      expect(takenOver.body).toEqual(first.body);
      expect(await effectsOf(service, merchant.merchantId)).toEqual(before);
      expectReplayOf(await post(merchant, "/payments", paymentBody(merchant), key), takenOver);
    });

    /**
     * Sends a capture with `key` while another session holds the payment's row, lets the key's lease
     * run out so that a retry with the key takes it over (and waits on the row too), runs `meanwhile`
     * in the holding session, commits it, and answers both requests.
     */
    async function captureOutlivingItsKey(
      merchant: TestMerchant,
      paymentId: string,
      key: string,
      meanwhile: (db: pg.Client) => Promise<unknown>,
    ): Promise<{ first: RestResponse; retry: RestResponse }> {
      const db = new pg.Client({ connectionString: await fileDatabaseUrl()! });
      await db.connect();
      // Only sessions this one blocks: other test files wait on locks of their own databases meanwhile.
      const waiting = async () =>
        Number(
          (await db.query("SELECT count(*) AS n FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))")).rows[0].n,
        );
      try {
        await db.query("BEGIN");
        await db.query("SELECT 1 FROM payments WHERE payment_id = $1 FOR UPDATE", [paymentId]);
        const first = post(merchant, `/payments/${paymentId}/capture`, {}, key);
        await waitUntil(waiting, (n) => n >= 1);
        const keyClaim = async () =>
          (await db.query("SELECT claim_token FROM idempotency_keys WHERE idempotency_key = $1", [key])).rows[0]?.claim_token as string;
        const firstClaim = await keyClaim();
        clock.advance(61_000);
        const retry = post(merchant, `/payments/${paymentId}/capture`, {}, key);
        await waitUntil(keyClaim, (claim) => claim !== firstClaim);
        await meanwhile(db);
        await db.query("COMMIT");
        return { first: await first, retry: await retry };
      } finally {
        await db.end();
      }
    }

    it.skipIf(!onPostgres)(
      "a request that outlives its claim's lease and is taken over by a retry is answered IK_01, not 500, and only the retry's effect is kept",
      async () => {
        const merchant = await newMerchant(service.url);
        const created = await post(merchant, "/payments", paymentBody(merchant, { capture_method: "manual" }));
        expect(created.body.status).toBe("requires_capture");
        const paymentId = created.body.payment_id as string;
        const key = uniqueId("lease");
        // The lease of the first request's claim on the payment ran out with its key's, so either
        // capture may take the payment first: the first request is IK_01 either way.
        const { first, retry } = await captureOutlivingItsKey(merchant, paymentId, key, async () => {});
        expectRestError(first, 409, "IK_01");
        expect({ status: retry.status, payment: retry.body.status }).toEqual({ status: 200, payment: "succeeded" });
        expectReplayOf(await post(merchant, `/payments/${paymentId}/capture`, {}, key), retry);
      },
    );

    it.skipIf(!onPostgres)(
      "a request taken over by a retry answers IK_01 even when what it then met fails it, and the retry's own failure frees the key",
      async () => {
        const merchant = await newMerchant(service.url);
        const created = await post(merchant, "/payments", paymentBody(merchant, { capture_method: "manual" }));
        const paymentId = created.body.payment_id as string;
        const key = uniqueId("lease");
        // The session holding the row cancels the payment, so both captures then find nothing to capture.
        const { first, retry } = await captureOutlivingItsKey(merchant, paymentId, key, (db) =>
          db.query("UPDATE payments SET status = 'cancelled', amount_capturable = 0 WHERE payment_id = $1", [paymentId]),
        );
        expectRestError(first, 409, "IK_01");
        expectRestError(retry, 400, "IR_14");
        expectRestError(await post(merchant, `/payments/${paymentId}/capture`, {}, key), 400, "IR_14");
        const payment = await rest(service.url, "GET", `/payments/${paymentId}`, { apiKey: merchant.apiKey });
        expect({ status: payment.body.status, amount_received: payment.body.amount_received }).toEqual({
          status: "cancelled",
          amount_received: null,
        });
      },
    );

    it("sixteen concurrent creates with one key on one instance: one payment; every other answer is a byte-identical replay or IK_01", async () => {
      const merchant = await newMerchant(service.url);
      for (let trial = 0; trial < 3; trial++) {
        const key = uniqueId(`burst${trial}`);
        const responses = await Promise.all(Array.from({ length: 16 }, () => post(merchant, "/payments", paymentBody(merchant), key)));
        expectOneEffect(responses);
        expect((await effectsOf(service, merchant.merchantId)).payments).toBe(trial + 1);
      }
    });
  });

  describe("scope: merchant and environment", () => {
    it("keeps merchant A's key apart from merchant B's: the same key string creates a payment for each", async () => {
      const [a, b] = [await newMerchant(service.url), await newMerchant(service.url)];
      const key = uniqueId("shared");
      const ofA = await post(a, "/payments", paymentBody(a), key);
      const ofB = await post(b, "/payments", paymentBody(b), key);
      for (const res of [ofA, ofB]) expect({ status: res.status, replayed: replayed(res) }).toEqual({ status: 200, replayed: null });
      expect(ofA.body.merchant_id).toBe(a.merchantId);
      expect(ofB.body.merchant_id).toBe(b.merchantId);
      expect(ofB.body.payment_id).not.toBe(ofA.body.payment_id);
      // Each merchant's retry replays its own payment (B's request, with its own profile, is no IK_02 against A's).
      expectReplayOf(await post(a, "/payments", paymentBody(a), key), ofA);
      expectReplayOf(await post(b, "/payments", paymentBody(b), key), ofB);
      expect(await effectsOf(service, a.merchantId)).toMatchObject({ payments: 1 });
      expect(await effectsOf(service, b.merchantId)).toMatchObject({ payments: 1 });
    });

    it("keeps a merchant's sandbox keys apart from its production keys", async () => {
      const merchant = await newMerchant(service.url);
      const production: TestMerchant = { ...merchant, apiKey: await issueKey(service.url, merchant.merchantId, "production") };
      const key = uniqueId("env");
      const inSandbox = await post(merchant, "/customers", { name: "Ada" }, key);
      const inProduction = await post(production, "/customers", { name: "Ada" }, key);
      for (const res of [inSandbox, inProduction])
        expect({ status: res.status, replayed: replayed(res) }).toEqual({ status: 200, replayed: null });
      expect(inProduction.body.customer_id).not.toBe(inSandbox.body.customer_id);
      expectReplayOf(await post(merchant, "/customers", { name: "Ada" }, key), inSandbox);
      expectReplayOf(await post(production, "/customers", { name: "Ada" }, key), inProduction);
      const rows = await service.app.dataSource.query(
        "SELECT livemode FROM idempotency_keys WHERE merchant_id = $1 AND idempotency_key = $2 ORDER BY livemode",
        [merchant.merchantId, key],
      );
      expect(rows).toEqual([{ livemode: false }, { livemode: true }]);
    });

    it("never answers a publishable key of the merchant with a secret key's stored response: it is refused (403 IR_22) as without a key", async () => {
      const merchant = await newMerchant(service.url);
      const publishable: TestMerchant = { ...merchant, apiKey: await issueKey(service.url, merchant.merchantId, "sandbox", "publishable") };
      const key = uniqueId("pk");
      expect((await post(merchant, "/payments", paymentBody(merchant), key)).status).toBe(200);
      const res = await post(publishable, "/payments", paymentBody(merchant), key);
      expectRestError(res, 403, "IR_22");
      expect(replayed(res)).toBeNull();
    });
  });

  describe("refunds and payouts", () => {
    it("creates one refund per key: the retry replays the first answer (same refund id) even after the refund moved on", async () => {
      const merchant = await newMerchant(service.url);
      const paid = await post(merchant, "/payments", paymentBody(merchant, { amount: 5000 }));
      expect(paid.body.status).toBe("succeeded");
      const key = uniqueId("refund");
      const body = { payment_id: paid.body.payment_id, amount: 1200, reason: "requested_by_customer" };
      const first = await post(merchant, "/refunds", body, key);
      expect(first.status, first.text).toBe(200);
      expect(first.body).toMatchObject({ amount: 1200, status: "pending" });
      const refundId = first.body.refund_id as string;

      const settled = await waitUntil(
        async () => {
          await service.jobs.runDue();
          return send(service.url, "GET", `/refunds/${refundId}`, { apiKey: merchant.apiKey });
        },
        (res) => res.body.status !== "pending",
      );
      expect(settled.body.status).toBe("succeeded");
      const after = await effectsOf(service, merchant.merchantId);
      const refundEvents = await eventCount(service, merchant.merchantId, refundId);

      const again = await post(merchant, "/refunds", body, key);
      expectReplayOf(again, first);
      expect(again.body).toMatchObject({ refund_id: refundId, status: "pending" });
      await service.jobs.runDue();
      expect(await effectsOf(service, merchant.merchantId)).toEqual(after);
      expect(after.refunds).toBe(1);
      expect(await eventCount(service, merchant.merchantId, refundId)).toBe(refundEvents);
      expectRestError(await post(merchant, "/refunds", { ...body, amount: 1300 }, key), 422, "IK_02");
      expect((await effectsOf(service, merchant.merchantId)).refunds).toBe(1);
    });

    it("creates one payout per key: the retry replays it (same payout id), with no second payout or event", async () => {
      const merchant = await newMerchant(service.url);
      const key = uniqueId("payout");
      const body = {
        amount: 2500,
        currency: "USD",
        profile_id: merchant.profileId,
        payout_type: "bank",
        confirm: false,
        payout_method_data: {
          bank: { bank_account_number: "000123456789", bank_routing_number: "110000000", bank_account_holder_name: "Ada Lovelace" },
        },
      };
      const first = await post(merchant, "/payouts/create", body, key);
      expect(first.status, first.text).toBe(200);
      expect(first.body).toMatchObject({ status: "requires_fulfillment", amount: 2500 });
      const after = await effectsOf(service, merchant.merchantId);
      expect(after).toMatchObject({ payouts: 1 });
      const again = await post(merchant, "/payouts/create", body, key);
      expectReplayOf(again, first);
      expect(again.body.payout_id).toBe(first.body.payout_id);
      expect(await effectsOf(service, merchant.merchantId)).toEqual(after);
    });
  });

  describe("kept 24 hours", () => {
    it("replays until 24 h after the first request; the reaper's next pass deletes it and the same key runs a new request", async () => {
      const merchant = await newMerchant(service.url);
      const key = uniqueId("day");
      const first = await post(merchant, "/payments", paymentBody(merchant), key);
      expect(first.status).toBe(200);

      clock.advance(day - 1000);
      await service.jobs.runDue();
      expect(await keyRow(service, merchant.merchantId, key)).toMatchObject({ state: "completed" });
      expectReplayOf(await post(merchant, "/payments", paymentBody(merchant), key), first);

      // The job runner's upkeep (a run at most every 10 s per instance) deletes expired keys.
      clock.advance(60_000);
      await service.jobs.runDue();
      expect(await keyRow(service, merchant.merchantId, key)).toBeUndefined();
      const fresh = await post(merchant, "/payments", paymentBody(merchant), key);
      expect({ status: fresh.status, replayed: replayed(fresh) }).toEqual({ status: 200, replayed: null });
      expect(fresh.body.payment_id).not.toBe(first.body.payment_id);
      expect(await effectsOf(service, merchant.merchantId)).toMatchObject({ payments: 2 });
      expectReplayOf(await post(merchant, "/payments", paymentBody(merchant), key), fresh);
    });

    it("the reaper's run deletes every expired key however many expired at once, and no key still within its day", async () => {
      const merchant = await newMerchant(service.url);
      const kept = uniqueId("kept");
      expect((await post(merchant, "/payments", paymentBody(merchant), kept)).status).toBe(200);
      // A day's worth of keys gone by at once (more than one statement of the reaper deletes), as left
      // behind by traffic of thousands a second: written straight into the table they live in.
      const expiredAt = new Date(clock.now().getTime() - 1000);
      await service.app.dataSource.query(
        `INSERT INTO idempotency_keys (merchant_id, livemode, idempotency_key, fingerprint, state, claim_token, locked_until, response, created, expires_at)
         SELECT $1, false, 'gone-' || i, '\\x00', 'completed', 'token', $2, '\\x00', $2, $2 FROM generate_series(1, 5000) AS i`,
        [merchant.merchantId, expiredAt],
      );
      const countOf = async () =>
        Number(
          (
            await service.app.dataSource.query(`SELECT count(*) AS n FROM idempotency_keys WHERE merchant_id = $1`, [merchant.merchantId])
          )[0].n,
        );
      expect(await countOf()).toBe(5001);
      clock.advance(60_000);
      await service.jobs.runDue();
      expect(await countOf()).toBe(1);
      expect(await keyRow(service, merchant.merchantId, kept)).toMatchObject({ state: "completed" });
    });

    it("is new again at 24 h even before the reaper ran, and may then carry another request", async () => {
      const merchant = await newMerchant(service.url);
      const key = uniqueId("stale");
      expect((await post(merchant, "/customers", { name: "before" }, key)).status).toBe(200);
      clock.advance(day);
      // No runDue: the row is still there, expired.
      expect(await keyRow(service, merchant.merchantId, key)).toMatchObject({ state: "completed" });
      const other = await post(merchant, "/customers", { name: "after" }, key);
      expect({ status: other.status, replayed: replayed(other), name: other.body.name }).toEqual({
        status: 200,
        replayed: null,
        name: "after",
      });
      expect(await effectsOf(service, merchant.merchantId)).toMatchObject({ customers: 2 });
    });
  });

  describe("effect and stored response commit together", () => {
    // Storing the response fails for keys starting with "unstorable_": the call's effect must go with it.
    beforeAll(async () => {
      await service.app.dataSource.query(`
        CREATE FUNCTION refuse_unstorable() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.state = 'completed' AND starts_with(NEW.idempotency_key, 'unstorable_') THEN
            RAISE EXCEPTION 'storing the response failed (test trigger)';
          END IF;
          RETURN NEW;
        END $$`);
      await service.app.dataSource.query(
        "CREATE TRIGGER refuse_unstorable BEFORE UPDATE ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION refuse_unstorable()",
      );
    });
    afterAll(async () => {
      await service?.app.dataSource.query("DROP TRIGGER IF EXISTS refuse_unstorable ON idempotency_keys");
      await service?.app.dataSource.query("DROP FUNCTION IF EXISTS refuse_unstorable()");
    });

    it("rolls every effect back (payment, customer, refund, payout, customer deletion) when its response cannot be stored, and frees the key", async () => {
      // A payment created without confirm: one confirmed at once is recorded before its processor is asked (the next test).
      const merchant = await newMerchant(service.url);
      const paid = await post(merchant, "/payments", paymentBody(merchant, { amount: 4000 }));
      const customer = await post(merchant, "/customers", { name: "Kept" });
      expect([paid.status, customer.status]).toEqual([200, 200]);
      const before = await effectsOf(service, merchant.merchantId);

      const { payment_method_data: _card, ...unconfirmed } = paymentBody(merchant, { confirm: false }) as Record<string, Json>;
      const calls: [string, string, unknown][] = [
        ["POST", "/payments", unconfirmed],
        ["POST", "/customers", { name: "Lost" }],
        ["POST", "/refunds", { payment_id: paid.body.payment_id, amount: 500 }],
        [
          "POST",
          "/payouts/create",
          {
            amount: 700,
            currency: "USD",
            profile_id: merchant.profileId,
            payout_type: "bank",
            confirm: false,
            payout_method_data: {
              bank: { bank_account_number: "000123456789", bank_routing_number: "110000000", bank_account_holder_name: "Ada" },
            },
          },
        ],
        ["DELETE", `/customers/${customer.body.customer_id}`, undefined],
      ];
      for (const [method, path, body] of calls) {
        const key = uniqueId("unstorable");
        const res = await send(service.url, method, path, { apiKey: merchant.apiKey, body, key });
        expect(expectRestError(res, 500, "HE_00"), `${method} ${path}`).not.toContain("test trigger");
        expect(await effectsOf(service, merchant.merchantId), `${method} ${path}`).toEqual(before);
        expect(await keyRow(service, merchant.merchantId, key)).toBeUndefined();
      }
      await service.jobs.runDue();
      const kept = await send(service.url, "GET", `/customers/${customer.body.customer_id}`, { apiKey: merchant.apiKey });
      expect(kept.status).toBe(200);
      expect(await effectsOf(service, merchant.merchantId)).toEqual(before);
    });

    it("keeps a payment confirmed at once, recorded before its processor was asked, and its key; recovery settles both, and the retry replays", async () => {
      const merchant = await newMerchant(service.url);
      const key = uniqueId("unstorable");

      const res = await send(service.url, "POST", "/payments", { apiKey: merchant.apiKey, body: paymentBody(merchant), key });

      expectRestError(res, 500, "HE_00");
      const [recorded] = await service.app.dataSource.query("SELECT payment_id, status, attempt FROM payments WHERE merchant_id = $1", [
        merchant.merchantId,
      ]);
      expect(recorded).toMatchObject({ status: "processing", attempt: { call: "authorize" } });
      expect(await keyRow(service, merchant.merchantId, key)).toMatchObject({ state: "in_flight" });
      expectRestError(
        await send(service.url, "POST", "/payments", { apiKey: merchant.apiKey, body: paymentBody(merchant, { amount: 1 }), key }),
        422,
        "IK_02",
      );
      // The sandbox authorized and captured: recovery asks it and writes what it did, with the key's answer
      // (which the trigger lets through this time).
      await service.app.dataSource.query("ALTER TABLE idempotency_keys DISABLE TRIGGER refuse_unstorable");
      try {
        expect(await settleLeftAttempts(service.app)).toBe(1);
      } finally {
        await service.app.dataSource.query("ALTER TABLE idempotency_keys ENABLE TRIGGER refuse_unstorable");
      }
      const retried = await send(service.url, "POST", "/payments", { apiKey: merchant.apiKey, body: paymentBody(merchant), key });
      expect({ status: retried.status, replayed: replayed(retried) }).toEqual({ status: 200, replayed: "true" });
      expect(retried.body).toMatchObject({ payment_id: recorded.payment_id, status: "succeeded", amount_received: 1000 });
    });
  });

  describe("what the key table keeps", () => {
    it("never holds a card number, a CVC or an API key's plaintext: only a hash of the request and the masked response", async () => {
      const merchant = await newMerchant(service.url);
      const cards = [
        { number: visa, cvc: "123" },
        { number: amex, cvc: amexCvc },
      ];
      for (const { number, cvc } of cards) {
        const res = await post(
          merchant,
          "/payments",
          paymentBody(merchant, { payment_method_data: { card: card(number, cvc) } }),
          uniqueId("card"),
        );
        expect(res.body.status).toBe("succeeded");
      }
      const payout = await post(
        merchant,
        "/payouts/create",
        {
          amount: 800,
          currency: "USD",
          profile_id: merchant.profileId,
          payout_type: "card",
          confirm: false,
          payout_method_data: {
            card: { card_number: visa, card_exp_month: "12", card_exp_year: "2035", card_holder_name: "Ada Lovelace" },
          },
        },
        uniqueId("card-payout"),
      );
      expect(payout.status, payout.text).toBe(200);
      const issued = await post(merchant, "/api-keys", { environment: "sandbox", name: "second" }, uniqueId("new-key"));
      expect(issued.status, issued.text).toBe(200);
      const plaintext = issued.body.api_key as string;
      expect(plaintext).toMatch(/^snd_/);

      // Every row of the table (every test's keys so far), each column's bytes.
      const rows: Record<string, unknown>[] = await service.app.dataSource.query("SELECT * FROM idempotency_keys");
      const mine = rows.filter((row) => row.merchant_id === merchant.merchantId);
      expect(mine).toHaveLength(4);
      const bytesOf = (row: Record<string, unknown>) =>
        Buffer.concat(Object.values(row).map((value) => (Buffer.isBuffer(value) ? value : Buffer.from(String(value)))));
      for (const row of rows) {
        const bytes = bytesOf(row);
        for (const secret of [visa, amex, plaintext]) expect(bytes.includes(secret), `${row.idempotency_key} holds ${secret}`).toBe(false);
      }
      // A stored CVC would be a string field: length-prefixed in a binary response, quoted in JSON. Four
      // bare digits also turn up by chance in binary data, which once failed this test on nothing.
      const storedForms = [Buffer.from(`\u0004${amexCvc}`, "latin1"), Buffer.from(JSON.stringify(amexCvc))];
      for (const row of mine) {
        for (const form of storedForms) expect(bytesOf(row).includes(form)).toBe(false);
      }
    });

    it("replays a key issued by a merchant's secret key without its plaintext (shown once), and issues no second key", async () => {
      const merchant = await newMerchant(service.url);
      const key = uniqueId("issue");
      const body = { environment: "sandbox", name: "ci" };
      const first = await post(merchant, "/api-keys", body, key);
      expect(first.status, first.text).toBe(200);
      expect(first.body.api_key).toMatch(/^snd_/);
      const after = await effectsOf(service, merchant.merchantId);
      expect(after.api_keys).toBe(2);

      const again = await post(merchant, "/api-keys", body, key);
      expect({ status: again.status, replayed: replayed(again) }).toEqual({ status: 200, replayed: "true" });
      expect(again.body).toEqual({ ...first.body, api_key: null });
      expect(await effectsOf(service, merchant.merchantId)).toEqual(after);
    });
  });
});

/** The same payment request as paymentBody, as the generated client sends it. */
function rpcPayment(merchant: TestMerchant, extra: Json = {}) {
  return fromJson(CreatePaymentRequestSchema, paymentBody(merchant, extra));
}

/**
 * Asserts the outcome of concurrent identical requests with one key: exactly one first answer (200,
 * not replayed); every other is a byte-identical replay of it or 409 IK_01. Returns the first answer.
 */
function expectOneEffect(responses: RestResponse[]): RestResponse {
  const firsts = responses.filter((r) => r.status === 200 && replayed(r) === null);
  expect(firsts, summary(responses)).toHaveLength(1);
  const first = firsts[0]!;
  for (const res of responses) {
    if (res === first) continue;
    if (res.status === 200) expectReplayOf(res, first);
    else expectRestError(res, 409, "IK_01");
  }
  return first;
}

describe.skipIf(!onPostgres)(
  "idempotency races between two instances on one PostgreSQL (PostgreSQL only: the embedded database serializes)",
  () => {
    const { a, b, instance } = servicePair(noPolling);

    it("16 concurrent creates (confirm, card 4242) with one key over both instances: exactly one payment, the others byte-identical replays or IK_01", async () => {
      const merchant = await newMerchant(a.url);
      const reference = await send(a.url, "POST", "/payments", { apiKey: merchant.apiKey, body: paymentBody(merchant, { amount: 1 }) });
      const eventsPerPayment = await eventCount(a, merchant.merchantId, reference.body.payment_id);
      expect(eventsPerPayment).toBeGreaterThan(0);
      const outcomes = { replays: 0, inFlight: 0 };

      for (let trial = 1; trial <= 5; trial++) {
        const key = uniqueId(`race${trial}`);
        const responses = await Promise.all(
          Array.from({ length: 16 }, (_, i) =>
            send(instance(i).url, "POST", "/payments", { apiKey: merchant.apiKey, body: paymentBody(merchant), key }),
          ),
        );
        const first = expectOneEffect(responses);
        outcomes.replays += responses.filter((r) => replayed(r) === "true").length;
        outcomes.inFlight += responses.filter((r) => r.status === 409).length;

        expect(await effectsOf(a, merchant.merchantId)).toMatchObject({ payments: 1 + trial, events: eventsPerPayment * (1 + trial) });
        expect(await eventCount(a, merchant.merchantId, first.body.payment_id)).toBe(eventsPerPayment);
        // Once it is over, every instance replays it.
        expectReplayOf(await send(b.url, "POST", "/payments", { apiKey: merchant.apiKey, body: paymentBody(merchant), key }), first);
        expectReplayOf(await send(a.url, "POST", "/payments", { apiKey: merchant.apiKey, body: paymentBody(merchant), key }), first);
      }
      // Sixteen calls at once do overlap: the race was real.
      expect(outcomes.inFlight).toBeGreaterThan(0);
    });

    it("a mismatch race: 16 concurrent requests with one key and two different bodies over both instances — one payment; the other body always gets IK_02", async () => {
      const merchant = await newMerchant(a.url);
      for (let trial = 1; trial <= 4; trial++) {
        const key = uniqueId(`mix${trial}`);
        const bodies = [paymentBody(merchant, { amount: 1000 }), paymentBody(merchant, { amount: 2000 })];
        // Body by i % 2, instance by (i >> 1) % 2: both bodies reach both instances.
        const responses = await Promise.all(
          Array.from({ length: 16 }, (_, i) =>
            send(instance(i >> 1).url, "POST", "/payments", { apiKey: merchant.apiKey, body: bodies[i % 2], key }),
          ),
        );
        const firsts = responses.filter((r) => r.status === 200 && replayed(r) === null);
        expect(firsts, summary(responses)).toHaveLength(1);
        const first = firsts[0]!;
        const winner = responses.indexOf(first) % 2;
        for (const [i, res] of responses.entries()) {
          if (res === first) continue;
          if (i % 2 !== winner) {
            expectRestError(res, 422, "IK_02");
          } else if (res.status === 200) {
            expectReplayOf(res, first);
          } else {
            expectRestError(res, 409, "IK_01");
          }
        }
        expect(first.body.amount).toBe(winner === 0 ? 1000 : 2000);
        expect((await effectsOf(a, merchant.merchantId)).payments).toBe(trial);
      }
    });

    it("a request really in flight (held on a table lock on instance A) gets IK_01 on instance B over REST and gRPC, IK_02 with another body; once it commits it is replayed", async () => {
      const merchant = await newMerchant(a.url);
      const key = uniqueId("held");
      const body = paymentBody(merchant);
      const locker = new pg.Client({ connectionString: await fileDatabaseUrl() });
      await locker.connect();
      let firstCall: Promise<RestResponse> | undefined;
      try {
        await locker.query("BEGIN");
        // Inserting a payment needs ROW EXCLUSIVE, which SHARE blocks: the create waits inside its transaction.
        await locker.query("LOCK TABLE payments IN SHARE MODE");
        firstCall = send(a.url, "POST", "/payments", { apiKey: merchant.apiKey, body, key });
        await waitUntil(
          async () => {
            await new Promise((resolve) => setTimeout(resolve, 10));
            return keyRow(b, merchant.merchantId, key);
          },
          (row) => row?.state === "in_flight",
        );

        const busy = await send(b.url, "POST", "/payments", { apiKey: merchant.apiKey, body, key });
        expectRestError(busy, 409, "IK_01");
        await expectRpcError(
          rpcClient(PaymentService, b.url, "grpc", { apiKey: merchant.apiKey }).createPayment(rpcPayment(merchant), {
            headers: { "x-idempotency-key": key },
          }),
          Code.Aborted,
          "IK_01",
        );
        expectRestError(
          await send(a.url, "POST", "/payments", { apiKey: merchant.apiKey, body: paymentBody(merchant, { amount: 5 }), key }),
          422,
          "IK_02",
        );
      } finally {
        await locker.query("ROLLBACK").catch(() => undefined);
        await locker.end();
      }
      const first = await firstCall!;
      expect({ status: first.status, replayed: replayed(first) }).toEqual({ status: 200, replayed: null });
      expectReplayOf(await send(b.url, "POST", "/payments", { apiKey: merchant.apiKey, body, key }), first);
      expect(await effectsOf(a, merchant.merchantId)).toMatchObject({ payments: 1 });
    });

    it("merchants racing with the same key string each get their own payment", async () => {
      const merchants = await Promise.all(Array.from({ length: 4 }, () => newMerchant(a.url)));
      const key = uniqueId("everyone");
      const responses = await Promise.all(
        merchants.flatMap((m, j) =>
          Array.from({ length: 4 }, (_, i) =>
            send(instance(i + j).url, "POST", "/payments", { apiKey: m.apiKey, body: paymentBody(m), key }),
          ),
        ),
      );
      for (const [j, m] of merchants.entries()) {
        const first = expectOneEffect(responses.slice(j * 4, j * 4 + 4));
        expect(first.body.merchant_id).toBe(m.merchantId);
        expect((await effectsOf(a, m.merchantId)).payments).toBe(1);
      }
    });
  },
);
