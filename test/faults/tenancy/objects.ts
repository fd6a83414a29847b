import { expect } from "vitest";
import { visaCard } from "../../support/cards.js";
import { rest, type JsonBody } from "../../support/clients.js";
import { adminIssue, type TestMerchant } from "../../support/merchant.js";
import { createPayment } from "../../support/payments.js";
import { payoutBodies, payoutCards } from "../../support/payout-destinations.js";
import { waitUntil } from "../../support/wait.js";
import type { Kind } from "./surface.js";

/*
 * One object of every kind a merchant owns in one environment, made through the REST API as the
 * merchant would: payments in every status a card can leave them in, a refund, payouts, a dispute,
 * an extra API key, the events all this recorded and the balance transactions of the money it moved.
 * In production only customers and keys can be made: no production payment processor can be
 * configured yet (IR_16), so there are no production payments, nor anything that follows from one.
 */

/** A merchant's key in one environment. */
export interface Tenant extends TestMerchant {
  readonly label: string;
  readonly livemode: boolean;
}

/** What a tenant made: every id by kind, and the objects its own calls use as their base. */
export interface Objects {
  readonly ids: ReadonlyMap<Kind, readonly string[]>;
  /** The runner's jobs on these objects (an authorization's expiry, a dispute's…), as the operator lists them. */
  readonly jobs: readonly string[];
  /** A payment still awaiting a payment method, for updates (none in production). */
  readonly openPayment?: string;
  /** A succeeded payment, for refunds. */
  readonly succeededPayment?: string;
  readonly refund?: string;
  /** A payout that awaits fulfillment, for updates. */
  readonly openPayout?: string;
}

const payouts = payoutBodies(() => new Date());

/** The sandbox card that declines, and the one that asks for 3-D Secure (docs/payments.md). */
const declinedCard = { ...visaCard, card_number: "4000000000000002" };
const threeDsCard = { ...visaCard, card_number: "4000000000003220" };

/** A call as the tenant that must answer 200; returns the body. */
async function as(url: string, tenant: Tenant, method: string, path: string, body?: unknown): Promise<JsonBody> {
  const res = await rest(url, method, path, { apiKey: tenant.apiKey, body });
  expect(res.status, `${tenant.label}: ${method} ${path}: ${res.text}`).toBe(200);
  return res.body;
}

/** Every object of a list RPC's pages as the tenant lists them (`path` ends in its query, if any). */
async function listAll(url: string, tenant: Tenant, path: string): Promise<JsonBody[]> {
  const objects: JsonBody[] = [];
  for (let offset = 0; ; offset += 100) {
    const page = await as(url, tenant, "GET", `${path}${path.includes("?") ? "&" : "?"}limit=100&offset=${offset}`);
    objects.push(...(page.data as JsonBody[]));
    if (!page.has_more) return objects;
  }
}

/** The tenant's balance transactions, newest first: every movement of its money in its environment. */
export function ledgerOf(url: string, tenant: Tenant): Promise<JsonBody[]> {
  return listAll(url, tenant, "/balance_transactions/list");
}

/** The ids of the jobs on `tenant`'s objects, through the operator's list of every merchant's jobs. */
async function jobsOf(url: string, tenant: Tenant): Promise<string[]> {
  const ids: string[] = [];
  for (let offset = 0; ; offset += 100) {
    const res = await rest(url, "GET", `/jobs/list?limit=100&offset=${offset}`, { admin: true });
    expect(res.status, `listing jobs: ${res.text}`).toBe(200);
    const environment = tenant.livemode ? "production" : "sandbox";
    for (const job of res.body.data as JsonBody[]) {
      if (job.merchant_id === tenant.merchantId && job.environment === environment) ids.push(job.job_id);
    }
    if (!res.body.has_more) return ids;
  }
}

/**
 * Makes one object of every kind as `tenant`. `refundAmount` (default 100) sets the tenant's money
 * apart: merchants that made the same objects would otherwise have equal balances, and a balance
 * answered from another merchant's ledger would pass for the caller's own.
 */
export async function makeObjects(url: string, tenant: Tenant, refundAmount = 100): Promise<Objects> {
  const customer = await as(url, tenant, "POST", "/customers", { name: `${tenant.label} customer`, email: "owner@example.com" });
  const key = await adminIssue(url, tenant.merchantId, { environment: tenant.livemode ? "production" : "sandbox", name: "spare" });
  const shared: Array<[Kind, string[]]> = [
    ["merchant", [tenant.merchantId]],
    ["profile", [tenant.profileId]],
    ["customer", [customer.customer_id]],
    ["apiKey", [tenant.keyId, key.key_id]],
  ];
  if (tenant.livemode) {
    // Nothing moves production money yet: its ledger is listed all the same, for whatever is there.
    const ledger = await ledgerOf(url, tenant);
    return {
      ids: new Map([...shared, ["balanceTransaction", ledger.map((t) => t.balance_transaction_id)]]),
      jobs: await jobsOf(url, tenant),
    };
  }
  const byCard = (card: JsonBody, extra: JsonBody = {}) =>
    createPayment(url, tenant, { confirm: true, payment_method: "card", payment_method_data: { card }, ...extra });
  const open = await createPayment(url, tenant, { customer_id: customer.customer_id, description: "open" });
  const saved = await as(url, tenant, "POST", "/payment_methods", {
    payment_method: "card",
    card: visaCard,
    customer_id: customer.customer_id,
  });
  // An off-session setup: a zero-amount payment that saves the customer's card with a mandate.
  const setup = await createPayment(url, tenant, {
    amount: 0,
    confirm: true,
    customer_id: customer.customer_id,
    setup_future_usage: "off_session",
    customer_acceptance: { acceptance_type: "offline" },
    payment_method_data: { card: visaCard },
  });
  const [manual, succeeded, disputable, threeDs, declined, toCancel] = await Promise.all([
    byCard(visaCard, { capture_method: "manual" }),
    byCard(visaCard),
    byCard(visaCard),
    byCard(threeDsCard),
    byCard(declinedCard),
    createPayment(url, tenant),
  ]);
  const cancelled = await as(url, tenant, "POST", `/payments/${toCancel.payment_id}/cancel`, { cancellation_reason: "duplicate" });
  const dispute = await as(url, tenant, "POST", `/sandbox/payments/${disputable.payment_id}/dispute`);
  const refund = await as(url, tenant, "POST", "/refunds", { payment_id: succeeded.payment_id, amount: refundAmount });
  const openPayout = await as(url, tenant, "POST", "/payouts/create", payouts.cardPayout(tenant, payoutCards.succeeds, { confirm: false }));
  const sentPayout = await as(url, tenant, "POST", "/payouts/create", payouts.cardPayout(tenant, payoutCards.succeeds));
  // The runner settles the refund and the sent payout after their calls answer: the matrix's
  // snapshots must see them settled, or that change would count as another key's doing.
  await Promise.all([
    waitUntil(
      () => as(url, tenant, "GET", `/refunds/${refund.refund_id}`),
      (r) => r.status !== "pending",
    ),
    waitUntil(
      () => as(url, tenant, "GET", `/payouts/${sentPayout.payout_id}`),
      (p) => p.status !== "pending",
    ),
  ]);
  const events = await as(url, tenant, "GET", "/events/list?limit=3");
  const payments = [open, manual, succeeded, disputable, threeDs, declined, cancelled, setup];
  const statuses = new Set(payments.map((p) => p.status));
  expect(statuses.size, `${tenant.label}: payment statuses ${[...statuses].join(", ")}`).toBeGreaterThanOrEqual(6);
  expect(events.data.length, `${tenant.label}: events`).toBeGreaterThan(0);
  // Listed once every movement above is written: the captures, the refund (settled above), the
  // dispute and the payouts each wrote theirs in the change that moved the money.
  const ledger = await ledgerOf(url, tenant);
  const sources = new Set(ledger.map((t) => t.source_id));
  const movers = [succeeded.payment_id, disputable.payment_id, refund.refund_id, dispute.dispute_id, sentPayout.payout_id];
  expect(
    movers.filter((id) => !sources.has(id)),
    `${tenant.label}: objects without a balance transaction`,
  ).toEqual([]);
  return {
    ids: new Map<Kind, string[]>([
      ...shared,
      ["paymentMethod", [saved.payment_method_id]],
      ["mandate", [setup.mandate_id]],
      ["payment", payments.map((p) => p.payment_id)],
      ["refund", [refund.refund_id]],
      ["payout", [openPayout.payout_id, sentPayout.payout_id]],
      ["dispute", [dispute.dispute_id]],
      ["event", events.data.map((e: JsonBody) => e.event_id)],
      ["balanceTransaction", ledger.map((t) => t.balance_transaction_id)],
    ]),
    jobs: await jobsOf(url, tenant),
    openPayment: open.payment_id,
    succeededPayment: succeeded.payment_id,
    refund: refund.refund_id,
    openPayout: openPayout.payout_id,
  };
}
