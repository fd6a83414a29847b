import { Code } from "@connectrpc/connect";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SandboxService } from "../gen/paymentservice/v1/sandbox_pb.js";
import { visaCard as card } from "./support/cards.js";
import { rest, rpcClient } from "./support/clients.js";
import { onPostgres } from "./support/database.js";
import { expectRestError, expectRpcError } from "./support/errors.js";
import { newMerchant, type TestMerchant } from "./support/merchant.js";
import { runningInstance, runningService } from "./support/running.js";
import { noPolling, startInstance, startService, type TestService } from "./support/service.js";
import { waitUntil } from "./support/wait.js";

/*
 * The sandbox test clock (decisions §4): with SANDBOX_TEST_CLOCK=true the admin moves the service's
 * clock, and every time-based behaviour follows — here the 7-day expiry of a manual authorization
 * and the settlement of a captured payment's credit.
 * The clock's offset lives in the database, so every instance on it moves together.
 */

const day = 86_400;

/** A manual-capture payment authorized now, waiting in requires_capture. */
async function authorized(service: TestService, merchant: TestMerchant): Promise<string> {
  const res = await rest(service.url, "POST", "/payments", {
    apiKey: merchant.apiKey,
    body: {
      amount: 1500,
      currency: "USD",
      profile_id: merchant.profileId,
      confirm: true,
      capture_method: "manual",
      payment_method_data: { card },
    },
  });
  expect(res.body.status).toBe("requires_capture");
  return res.body.payment_id;
}

async function status(
  service: TestService,
  merchant: TestMerchant,
  paymentId: string,
): Promise<{ status: string; cancellation_reason: string | null }> {
  const res = await rest(service.url, "GET", `/payments/${paymentId}`, { apiKey: merchant.apiKey });
  return { status: res.body.status, cancellation_reason: res.body.cancellation_reason };
}

async function advance(service: TestService, seconds: unknown) {
  return rest(service.url, "POST", "/sandbox/clock/advance", { admin: true, body: { seconds } });
}

describe("with SANDBOX_TEST_CLOCK=true", () => {
  let first: TestService;
  let second: TestService;

  beforeAll(async () => {
    // Polling off: the tests run due jobs themselves, so nothing happens behind their back.
    first = await startService({ ...noPolling, SANDBOX_TEST_CLOCK: "true" });
    // One instance whatever the topology: its runDue() is what makes it read the moved clock (its
    // poll is out of reach), and the test then calls that very instance.
    second = onPostgres ? await startInstance({ ...noPolling, SANDBOX_TEST_CLOCK: "true" }) : first;
  });
  afterAll(async () => {
    if (second !== first) await second?.close();
    await first?.close();
  });

  it("moves time forward for the authorization expiry: 6 days later nothing, 8 days later cancelled as expired", async () => {
    const merchant = await newMerchant(first.url);
    const paymentId = await authorized(first, merchant);

    const before = Date.now();
    const moved = await advance(first, 6 * day);
    expect(moved.status).toBe(200);
    expect(Date.parse(moved.body.now) - before).toBeGreaterThanOrEqual(6 * day * 1000);
    await first.jobs.runDue();
    expect(await status(first, merchant, paymentId)).toEqual({ status: "requires_capture", cancellation_reason: null });

    // Advancing also wakes the instance's runner, which may be the one that runs the expiry.
    expect((await advance(first, 2 * day)).status).toBe(200);
    await first.jobs.runDue();
    const expired = await waitUntil(
      () => status(first, merchant, paymentId),
      (s) => s.status !== "requires_capture",
    );
    expect(expired).toEqual({ status: "cancelled", cancellation_reason: "expired" });
  });

  it.skipIf(!onPostgres)("moves every instance on the database (PostgreSQL only: two instances)", async () => {
    const merchant = await newMerchant(first.url);
    const paymentId = await authorized(first, merchant);
    expect((await advance(first, 8 * day)).status).toBe(200);
    await second.jobs.runDue();
    const expired = await waitUntil(
      () => status(second, merchant, paymentId),
      (s) => s.status !== "requires_capture",
    );
    expect(expired).toEqual({ status: "cancelled", cancellation_reason: "expired" });

    // The second instance's own clock moved too: a capture_on one real day ahead is in its past now.
    const tomorrow = new Date(Date.now() + day * 1000).toISOString();
    const scheduled = await rest(second.url, "POST", "/payments", {
      apiKey: merchant.apiKey,
      body: { amount: 1500, currency: "USD", profile_id: merchant.profileId, capture_method: "scheduled", capture_on: tomorrow },
    });
    expect(expectRestError(scheduled, 400, "IR_05")).toContain("capture_on");
  });

  it("makes a captured payment's credit available once it passes the profile's settlement delay (docs/ledger.md)", async () => {
    const merchant = await newMerchant(first.url);
    const paid = await rest(first.url, "POST", "/payments", {
      apiKey: merchant.apiKey,
      body: { amount: 1500, currency: "USD", profile_id: merchant.profileId, confirm: true, payment_method_data: { card } },
    });
    expect(paid.body.status).toBe("succeeded");
    const balance = async () => (await rest(first.url, "GET", "/balance", { apiKey: merchant.apiKey })).body;
    const pending = { available: [{ currency: "USD", amount: 0 }], pending: [{ currency: "USD", amount: 1500 }] };
    expect(await balance()).toEqual(pending);
    expect((await advance(first, 2 * day - 60)).status).toBe(200);
    expect(await balance()).toEqual(pending);
    expect((await advance(first, 60)).status).toBe(200);
    expect(await balance()).toEqual({ available: [{ currency: "USD", amount: 1500 }], pending: [{ currency: "USD", amount: 0 }] });
  });

  it("answers the same over gRPC, with the new time", async () => {
    const client = rpcClient(SandboxService, first.url, "grpc", { admin: true });
    const before = Date.now();
    const answer = await client.advanceClock({ seconds: 60n });
    expect(timestampDate(answer.now!).getTime() - before).toBeGreaterThanOrEqual(60_000);
  });

  it("rejects a missing, zero or fractional number of seconds naming the field", async () => {
    expect(expectRestError(await advance(first, undefined), 400, "IR_04")).toContain("seconds");
    expect(expectRestError(await advance(first, 0), 400, "IR_05")).toContain("seconds");
    expect(expectRestError(await advance(first, 1.5), 400, "IR_05")).toContain("seconds");
  });

  it("is for the operator only: a merchant key is not enough", async () => {
    const merchant = await newMerchant(first.url);
    const res = await rest(first.url, "POST", "/sandbox/clock/advance", { apiKey: merchant.apiKey, body: { seconds: 60 } });
    expectRestError(res, 401, "IR_01");
  });
});

describe("without SANDBOX_TEST_CLOCK", () => {
  const service = runningService();

  it("refuses to move time with IR_16 on REST and gRPC", async () => {
    expect(expectRestError(await advance(service, 60), 400, "IR_16")).toContain("SANDBOX_TEST_CLOCK");
    await expectRpcError(
      rpcClient(SandboxService, service.url, "grpc", { admin: true }).advanceClock({ seconds: 60n }),
      Code.FailedPrecondition,
      "IR_16",
    );
  });
});

describe("the test clock's latest time", () => {
  // One instance: another follows an advance only at its next job-runner pass, and these tests do
  // not poll, so a merchant made on another would take that instance's older time.
  const service = runningInstance({ ...noPolling, SANDBOX_TEST_CLOCK: "true" });

  it("refuses, naming seconds, an advance past 9000-01-01 on REST and gRPC; objects made then still answer", async () => {
    const tenYears = 10 * 365 * day;
    // Most of the way in one move of the shared offset (an advance goes at most ten years at a time,
    // and 700 of them only spend time), then by advances until one is refused.
    await service.app.dataSource.query("UPDATE sandbox_clock SET offset_ms = $1 WHERE id = 1", [
      Date.parse("8975-01-01T00:00:00Z") - Date.now(),
    ]);
    let last = "";
    for (;;) {
      const res = await advance(service, tenYears);
      if (res.status !== 200) {
        expect(expectRestError(res, 400, "IR_05")).toContain("seconds");
        break;
      }
      last = res.body.now;
    }
    expect(new Date(last).getTime()).toBeLessThanOrEqual(Date.parse("9000-01-01T00:00:00Z"));
    expect(new Date(last).getTime()).toBeGreaterThan(Date.parse("9000-01-01T00:00:00Z") - tenYears * 1000);
    await expectRpcError(
      rpcClient(SandboxService, service.url, "grpc", { admin: true }).advanceClock({ seconds: BigInt(tenYears) }),
      Code.InvalidArgument,
      "IR_05",
    );
    expect((await advance(service, 60)).status).toBe(200);

    const merchant = await newMerchant(service.url);
    const keys = await rest(service.url, "GET", `/api-keys?merchant_id=${merchant.merchantId}`, { admin: true });
    expect(keys.status, JSON.stringify(keys.body)).toBe(200);
    expect(new Date(keys.body.data[0].created).getUTCFullYear()).toBeGreaterThanOrEqual(8990);
  });
});
