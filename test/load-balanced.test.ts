import { describe, expect, it } from "vitest";
import { cardData } from "./support/cards.js";
import { newMerchant, type TestMerchant, updateProfile } from "./support/merchant.js";
import { payoutAccounts, payoutBodies } from "./support/payout-destinations.js";
import { expectError, type Json, type RestCall, restCaller } from "./support/resource-api.js";
import { runningService } from "./support/running.js";
import { receiversPerTest } from "./support/webhook-receiver.js";
import { waitUntil } from "./support/wait.js";

/*
 * One scenario per resource, each call answered by whichever instance the topology picks. CI runs
 * this file with three instances behind HAProxy (TEST_TOPOLOGY=haproxy), where consecutive calls
 * land on different instances: what one instance wrote, the next reads, changes and lists, and the
 * background work (refunds settling, payouts sent, webhooks delivered) runs on any of them. The
 * rules of each resource are their own suites' subject; the other files behind HAProxy are those
 * whose point is several instances (docs/testing.md).
 *
 * The services poll for due jobs and run on the system clock, as in production.
 */

const service = runningService();
const newReceiver = receiversPerTest();

const visa = "4242424242424242";
const card = (): Json => cardData(visa, new Date());
const { bankPayout } = payoutBodies(() => new Date());

/** A fresh merchant and a REST caller with its sandbox secret key. */
async function merchantCalls(): Promise<{ merchant: TestMerchant; call: RestCall }> {
  const merchant = await newMerchant(service.url);
  return { merchant, call: restCaller(service.url, merchant.apiKey) };
}

/** Creates a payment confirmed with the Visa test card: `fields` say how much and how it is captured. */
function cardPayment(call: RestCall, merchant: TestMerchant, fields: Json): Promise<Json> {
  return call("POST", "/payments", {
    currency: "USD",
    profile_id: merchant.profileId,
    confirm: true,
    payment_method: "card",
    payment_method_data: card(),
    ...fields,
  });
}

/** Retrieves `path` until its status is `status`: background work runs on whichever instance claims it. */
function reaches(call: RestCall, path: string, status: string): Promise<Json> {
  return waitUntil(
    () => call("GET", path),
    (object) => object.status === status,
    2_000,
  );
}

describe("one service, however many instances answer", () => {
  it("payments and refunds: authorized, captured in part, refunded, listed", async () => {
    const { merchant, call } = await merchantCalls();
    const payment = await cardPayment(call, merchant, { amount: 5000, capture_method: "manual" });
    expect(payment).toMatchObject({ status: "requires_capture", amount_capturable: 5000 });
    const paymentId = payment.payment_id as string;

    expect(await call("POST", `/payments/${paymentId}/capture`, { amount_to_capture: 3000 })).toMatchObject({
      status: "succeeded",
      amount_received: 3000,
    });
    expect(await call("GET", `/payments/${paymentId}`)).toMatchObject({ status: "succeeded", amount_received: 3000 });

    const refund = await call("POST", "/refunds", { payment_id: paymentId, amount: 1000 });
    expect(await reaches(call, `/refunds/${refund.refund_id}`, "succeeded")).toMatchObject({ amount: 1000, payment_id: paymentId });
    await expectError(call("POST", "/refunds", { payment_id: paymentId, amount: 2001 }), "IR_13", "2000");

    const payments = await call("POST", "/payments/list", {});
    expect((payments.data as Json[]).map((p) => p.payment_id)).toEqual([paymentId]);
    const refunds = await call("GET", `/refunds/list?payment_id=${paymentId}`);
    expect((refunds.data as Json[]).map((r) => r.refund_id)).toEqual([refund.refund_id]);
  });

  it("payouts: created, sent by a job on any instance, listed", async () => {
    const { merchant, call } = await merchantCalls();
    const payout = await call("POST", "/payouts/create", bankPayout(merchant, payoutAccounts.succeeds));
    expect(await reaches(call, `/payouts/${payout.payout_id}`, "success")).toMatchObject({ amount: 1000, currency: "USD" });
    const payouts = await call("POST", "/payouts/list", {});
    expect((payouts.data as Json[]).map((p) => p.payout_id)).toEqual([payout.payout_id]);
  });

  it("customers: created, updated, retrieved, listed, deleted", async () => {
    const { call } = await merchantCalls();
    const customer = await call("POST", "/customers", { name: "Ada Lovelace", email: "ada@example.com" });
    const id = customer.customer_id as string;
    expect(await call("POST", `/customers/${id}`, { name: "Ada King" })).toMatchObject({ name: "Ada King", email: "ada@example.com" });
    expect(await call("GET", `/customers/${id}`)).toMatchObject({ name: "Ada King" });
    expect(((await call("GET", "/customers/list")).data as Json[]).map((c) => c.customer_id)).toEqual([id]);
    expect(await call("DELETE", `/customers/${id}`)).toMatchObject({ customer_id: id, deleted: true });
    await expectError(call("GET", `/customers/${id}`), "HE_02");
  });

  it("disputes: opened on a payment, accepted, listed", async () => {
    const { merchant, call } = await merchantCalls();
    const payment = await cardPayment(call, merchant, { amount: 2500 });
    const dispute = await call("POST", `/sandbox/payments/${payment.payment_id}/dispute`);
    expect(dispute).toMatchObject({ status: "opened", amount: 2500, payment_id: payment.payment_id });
    expect(await call("POST", `/disputes/${dispute.dispute_id}/accept`)).toMatchObject({ status: "accepted" });
    expect(await call("GET", `/disputes/${dispute.dispute_id}`)).toMatchObject({ status: "accepted" });
    const disputes = await call("POST", "/disputes/list", {});
    expect((disputes.data as Json[]).map((d) => d.dispute_id)).toEqual([dispute.dispute_id]);
  });

  it("events: every event listed is delivered to the webhook once, whichever instance sends it", async () => {
    const { merchant, call } = await merchantCalls();
    const receiver = await newReceiver();
    await updateProfile(service.url, merchant, { webhook_url: receiver.url });
    for (const amount of [1000, 2000, 3000]) {
      await cardPayment(call, merchant, { amount });
    }
    const events = await waitUntil(
      async () => (await call("POST", "/events/list", {})).data as Json[],
      (listed) => listed.every((event) => (event.delivery as Json).status === "delivered"),
      2_000,
    );
    expect(events.map((event) => event.type)).toEqual(["payment.succeeded", "payment.succeeded", "payment.succeeded"]);
    const delivered = receiver.requests.map((request) => JSON.parse(request.body).event_id as string);
    expect(delivered.sort()).toEqual(events.map((event) => event.event_id).sort());
  });
});
