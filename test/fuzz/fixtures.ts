/*
 * The objects the fuzzer aims at: created through the REST API as an operator and a merchant would
 * (README's curl examples), so that fuzzed ids hit real rows in every interesting status and fuzzed
 * keys include every kind the authentication rules tell apart.
 */

/** The keys a fuzzed request may present, one of each kind the service treats differently. */
export interface FixtureKeys {
  /** The key that gets past authentication for most methods; also the health check's key. */
  readonly sandboxSecret: string;
  readonly sandboxPublishable: string;
  readonly productionSecret: string;
  readonly revoked: string;
  /** A valid key of a second merchant, whose objects the first merchant's keys must not see. */
  readonly otherMerchantSecret: string;
}

/** Ids of real objects by kind, for path variables and id fields. */
export interface FixtureIds {
  readonly merchant: readonly string[];
  readonly profile: readonly string[];
  readonly customer: readonly string[];
  readonly payment: readonly string[];
  readonly refund: readonly string[];
  readonly payout: readonly string[];
  readonly dispute: readonly string[];
  readonly paymentMethod: readonly string[];
  readonly mandate: readonly string[];
  /**
   * The first merchant's sandbox balance transactions, in a fixed order (by the fixture that moved the
   * money, then type), so that two sets created the same way pair up.
   */
  readonly balanceTransaction: readonly string[];
  /**
   * Keys the fuzzer may revoke. The keys in FixtureKeys are deliberately not here: revoking the
   * health check's key would end the run.
   */
  readonly apiKey: readonly string[];
}

/** Everything setup created. */
export interface Fixtures {
  readonly keys: FixtureKeys;
  readonly ids: FixtureIds;
  /** client_secret of each payment, which lets a publishable key retrieve and confirm it. */
  readonly clientSecrets: readonly string[];
}

/** Card numbers setup sends in card_number fields; the log must never show them. */
export const fixtureCardNumbers = ["4242424242424242", "4000000000003220", "4000000000000259"] as const;

const card = (number: string) => ({ card_number: number, card_exp_month: "12", card_exp_year: "2030", card_cvc: "123" });

type Json = Record<string, unknown>;

/**
 * Creates two merchants with keys, customers, payments in several statuses, refunds, payouts,
 * disputes, saved cards and mandates, and collects the balance transactions the money they moved wrote.
 */
export async function createFixtures(baseUrl: string, adminApiKey: string): Promise<Fixtures> {
  const call = async (method: string, path: string, auth: { key?: string; admin?: boolean }, body?: Json): Promise<Json> => {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (auth.key !== undefined) headers["api-key"] = auth.key;
    if (auth.admin === true) headers["admin-api-key"] = adminApiKey;
    const response = await fetch(baseUrl + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`fixture setup: ${method} ${path} answered ${response.status} ${text}`);
    return JSON.parse(text) as Json;
  };
  const admin = { admin: true };
  const text = (json: Json, field: string): string => {
    const value = json[field];
    if (typeof value !== "string") throw new Error(`fixture setup: no ${field} in ${JSON.stringify(json)}`);
    return value;
  };
  const issueKey = async (merchantId: string, environment: string, kind: string): Promise<{ apiKey: string; keyId: string }> => {
    const issued = await call("POST", "/api-keys", admin, { merchant_id: merchantId, environment, kind, name: `fuzz ${kind}` });
    return { apiKey: text(issued, "api_key"), keyId: text(issued, "key_id") };
  };

  const merchant = await call("POST", "/merchants", admin, { merchant_name: "Fuzz merchant" });
  const merchantId = text(merchant, "merchant_id");
  const profileId = text(merchant, "default_profile_id");
  const secondProfile = await call("POST", `/merchants/${merchantId}/profiles`, admin, {
    profile_name: "web",
    return_url: "https://shop.example/return",
    webhook_url: "https://shop.example/hooks",
  });
  const other = await call("POST", "/merchants", admin, { merchant_name: "Other merchant" });
  const otherId = text(other, "merchant_id");

  const secret = await issueKey(merchantId, "sandbox", "secret");
  const publishable = await issueKey(merchantId, "sandbox", "publishable");
  const production = await issueKey(merchantId, "production", "secret");
  const revoked = await issueKey(merchantId, "sandbox", "secret");
  await call("DELETE", `/api-keys/${revoked.keyId}/revoke`, admin);
  const expendable = [await issueKey(merchantId, "sandbox", "secret"), await issueKey(merchantId, "sandbox", "publishable")];
  const otherSecret = await issueKey(otherId, "sandbox", "secret");

  const sandbox = { key: secret.apiKey };
  /** The dispute the sandbox network reports for card 4000000000000259 is opened by a job, right after the payment. */
  const reportedDispute = async (paymentId: string): Promise<Json> => {
    for (let attempt = 0; attempt < 100; attempt++) {
      const found = (await call("GET", `/disputes/list?payment_id=${paymentId}`, sandbox)).data as Json[];
      if (found.length > 0) return found[0]!;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`fixture setup: no dispute was reported for ${paymentId}`);
  };
  /** Waits for the job that sends a refund or payout to settle it: only then is its money's movement final. */
  const settled = async (path: string): Promise<Json> => {
    for (let attempt = 0; attempt < 100; attempt++) {
      const found = await call("GET", path, sandbox);
      if (found.status !== "pending") return found;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`fixture setup: ${path} is still pending`);
  };
  const customers = [
    await call("POST", "/customers", sandbox, {}),
    await call("POST", "/customers", sandbox, {
      customer_id: `cus_fuzz_${Date.now()}`,
      email: "jane@example.com",
      name: "Jane",
      phone: "7700900123",
      phone_country_code: "+44",
      address: { line1: "1 High St", city: "London", postal_code: "N1 1AA", country: "GB" },
      metadata: { crm_id: "42" },
    }),
    await call("POST", "/customers", { key: production.apiKey }, { name: "Production customer" }),
    await call("POST", "/customers", { key: otherSecret.apiKey }, { name: "Other merchant's customer" }),
  ];
  const customerId = text(customers[0]!, "customer_id");

  const pay = (body: Json) => call("POST", "/payments", sandbox, { amount: 1000, currency: "USD", profile_id: profileId, ...body });
  const succeeded = await pay({ confirm: true, payment_method: "card", payment_method_data: { card: card(fixtureCardNumbers[0]) } });
  const succeededId = text(succeeded, "payment_id");
  const disputable = await pay({ confirm: true, payment_method: "card", payment_method_data: { card: card(fixtureCardNumbers[0]) } });
  const unconfirmedToCancel = await pay({ description: "to cancel" });
  const payments = [
    succeeded,
    disputable,
    unconfirmedToCancel,
    await pay({
      capture_method: "manual",
      confirm: true,
      payment_method: "card",
      payment_method_data: { card: card(fixtureCardNumbers[0]) },
    }),
    await pay({ confirm: true, payment_method: "card", payment_method_data: { card: card(fixtureCardNumbers[1]) } }),
    await pay({ confirm: true, payment_method: "card", payment_method_data: { card: card(fixtureCardNumbers[2]) } }),
    await pay({ customer_id: customerId, capture_method: "manual", metadata: { order: "42" } }),
    await call(
      "POST",
      "/payments",
      { key: otherSecret.apiKey },
      { amount: 700, currency: "GBP", profile_id: text(other, "default_profile_id") },
    ),
  ];
  await call("POST", `/payments/${text(unconfirmedToCancel, "payment_id")}/cancel`, sandbox, { cancellation_reason: "duplicate" });

  const refunds = [
    await call("POST", "/refunds", sandbox, { payment_id: succeededId, amount: 300, reason: "duplicate" }),
    await call("POST", "/refunds", sandbox, { payment_id: succeededId, amount: 200, refund_type: "scheduled" }),
  ];
  const opened = await call("POST", `/sandbox/payments/${text(disputable, "payment_id")}/dispute`, sandbox);
  const reported = await reportedDispute(text(payments[5]!, "payment_id"));

  const payouts = [
    await call("POST", "/payouts/create", sandbox, {
      amount: 900,
      currency: "EUR",
      profile_id: profileId,
      payout_type: "card",
      priority: "instant",
      payout_method_data: { card: { card_number: fixtureCardNumbers[0], card_exp_month: "12", card_exp_year: "2030" } },
    }),
    await call("POST", "/payouts/create", sandbox, {
      amount: 5000,
      currency: "USD",
      profile_id: profileId,
      payout_type: "bank",
      payout_method_data: {
        bank: { bank_account_number: "000123456789", bank_routing_number: "110000000", bank_account_holder_name: "Jane Doe" },
      },
      name: "Jane Doe",
      confirm: false,
    }),
  ];

  const paymentMethods = [
    await call("POST", "/payment_methods", sandbox, { payment_method: "card", card: card(fixtureCardNumbers[0]), customer_id: customerId }),
    await call("POST", "/payment_methods", { key: publishable.apiKey }, { payment_method: "card", card: card(fixtureCardNumbers[1]) }),
    await call(
      "POST",
      "/payment_methods",
      { key: otherSecret.apiKey },
      { payment_method: "card", card: card(fixtureCardNumbers[0]), customer_id: text(customers[3]!, "customer_id") },
    ),
  ];

  /** An off-session setup: a zero-amount payment that saves the customer's card with a mandate. */
  const offSessionSetup = (key: string, profile: string, customer: string, extra: Json = {}): Promise<Json> =>
    call(
      "POST",
      "/payments",
      { key },
      {
        amount: 0,
        currency: "USD",
        profile_id: profile,
        confirm: true,
        customer_id: customer,
        setup_future_usage: "off_session",
        customer_acceptance: { acceptance_type: "offline" },
        payment_method_data: { card: card(fixtureCardNumbers[0]) },
        ...extra,
      },
    );
  const mandates = [
    await offSessionSetup(secret.apiKey, profileId, customerId),
    await offSessionSetup(secret.apiKey, profileId, text(customers[1]!, "customer_id"), {
      mandate_data: { type: "single_use", amount_limit: 5000, currency: "USD" },
    }),
    await offSessionSetup(otherSecret.apiKey, text(other, "default_profile_id"), text(customers[3]!, "customer_id")),
  ];

  // Every movement above is written once the instant refund and the instant payout are settled (the
  // scheduled refund waits for its settlement run, a minute away): a set created again lists the same.
  await settled(`/refunds/${text(refunds[0]!, "refund_id")}`);
  await settled(`/payouts/${text(payouts[0]!, "payout_id")}`);
  /** The fixtures that may move money, in creation order: a balance transaction is placed by its source_id's position here. */
  const movers = [
    ...payments.map((p) => text(p, "payment_id")),
    ...refunds.map((r) => text(r, "refund_id")),
    text(opened, "dispute_id"),
    text(reported, "dispute_id"),
    ...payouts.map((p) => text(p, "payout_id")),
    ...mandates.map((m) => text(m, "payment_id")),
  ];
  const ledger: Json[] = [];
  for (let offset = 0; ; offset += 100) {
    const page = await call("GET", `/balance_transactions/list?limit=100&offset=${offset}`, sandbox);
    ledger.push(...(page.data as Json[]));
    if (page.has_more !== true) break;
  }
  // The list's own order (newest first) breaks ties: the fixtures are made one after the other.
  const position = (t: Json) => movers.indexOf(text(t, "source_id"));
  const byPlace = (a: Json, b: Json) =>
    position(a) - position(b) || (text(a, "type") < text(b, "type") ? -1 : text(a, "type") > text(b, "type") ? 1 : 0);
  const balanceTransactions = ledger.sort(byPlace).map((t) => text(t, "balance_transaction_id"));
  if (balanceTransactions.length === 0)
    throw new Error("fixture setup: the fixtures' payments, refunds, disputes and payouts wrote no balance transaction");

  return {
    keys: {
      sandboxSecret: secret.apiKey,
      sandboxPublishable: publishable.apiKey,
      productionSecret: production.apiKey,
      revoked: revoked.apiKey,
      otherMerchantSecret: otherSecret.apiKey,
    },
    ids: {
      merchant: [merchantId, otherId],
      profile: [profileId, text(secondProfile, "profile_id"), text(other, "default_profile_id")],
      customer: customers.map((c) => text(c, "customer_id")),
      payment: payments.map((p) => text(p, "payment_id")),
      refund: refunds.map((r) => text(r, "refund_id")),
      payout: payouts.map((p) => text(p, "payout_id")),
      dispute: [text(opened, "dispute_id"), text(reported, "dispute_id")],
      paymentMethod: paymentMethods.map((m) => text(m, "payment_method_id")),
      mandate: mandates.map((m) => text(m, "mandate_id")),
      balanceTransaction: balanceTransactions,
      apiKey: [...expendable.map((k) => k.keyId), revoked.keyId],
    },
    clientSecrets: payments.map((p) => text(p, "client_secret")),
  };
}

/**
 * Every string of a fixture set in a fixed order, so that two sets created the same way (before and
 * after a restart on an empty database) pair up value by value.
 */
export function fixtureStrings(fixtures: Fixtures): string[] {
  const { keys, ids } = fixtures;
  return [
    keys.sandboxSecret,
    keys.sandboxPublishable,
    keys.productionSecret,
    keys.revoked,
    keys.otherMerchantSecret,
    ...ids.merchant,
    ...ids.profile,
    ...ids.customer,
    ...ids.payment,
    ...ids.refund,
    ...ids.payout,
    ...ids.dispute,
    ...ids.paymentMethod,
    ...ids.mandate,
    ...ids.balanceTransaction,
    ...ids.apiKey,
    ...fixtures.clientSecrets,
  ];
}
