import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Code } from "@connectrpc/connect";
import { build } from "esbuild";
import type { Browser, BrowserContext } from "playwright-core";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.js";
import { visaCard } from "../support/cards.js";
import { rest } from "../support/clients.js";
import { issueKey, newMerchant } from "../support/merchant.js";
import { createPayment, retrievePayment } from "../support/payments.js";
import { startService, type TestService } from "../support/service.js";
import { type Site, startSite } from "../support/site.js";

/*
 * A merchant's checkout page on its own origin confirms a payment from the customer's browser
 * (docs/cors.md): headless Chromium loads the page from a small site on another port, the page's
 * script (connect-web and the generated PaymentService client, bundled with esbuild as a merchant
 * would) confirms and retrieves the payment with a publishable key and the payment's client_secret,
 * and the same page served from an origin not in CORS_ALLOWED_ORIGINS cannot. The page also
 * tokenizes a card (PaymentMethodService) for the backend to pay with and save, and pays a later
 * payment with the saved card in one click (docs/payment-methods.md).
 */

const repository = fileURLToPath(new URL("../..", import.meta.url));

/** The checkout page's script: calls the service over Connect or gRPC-Web and reports what the page could read. */
const checkoutScript = `
import { ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { PaymentMethodService } from "./gen/paymentservice/v1/payment_method_pb.js";
import { PaymentMethod, PaymentService, PaymentStatus } from "./gen/paymentservice/v1/payment_pb.js";

const clients = (baseUrl, apiKey) => {
  const interceptors = [(next) => (req) => { req.header.set("api-key", apiKey); return next(req); }];
  const transport = createConnectTransport({ baseUrl, interceptors });
  return { payments: createClient(PaymentService, transport), paymentMethods: createClient(PaymentMethodService, transport) };
};

// The card form's submit: the card goes to the service only, which answers a token (pm_…) for the merchant's backend.
window.tokenize = async ({ baseUrl, apiKey, card }) => {
  const { paymentMethods } = clients(baseUrl, apiKey);
  const token = await paymentMethods.createPaymentMethod({ paymentMethod: PaymentMethod.CARD, card });
  return { paymentMethodId: token.paymentMethodId, last4: token.card.last4, customerId: token.customerId ?? null };
};

// One click: confirms the payment with the saved card the backend rendered into the page.
window.payWithSaved = async ({ baseUrl, apiKey, paymentId, clientSecret, paymentMethodId }) => {
  const { payments } = clients(baseUrl, apiKey);
  const confirmed = await payments.confirmPayment({ paymentId, clientSecret, paymentMethodId });
  return { status: PaymentStatus[confirmed.status], paymentMethodId: confirmed.paymentMethodId, last4: confirmed.paymentMethodData.card.last4 };
};

window.checkout = async ({ baseUrl, protocol, apiKey, paymentId, clientSecret, card }) => {
  const interceptors = [(next) => (req) => { req.header.set("api-key", apiKey); return next(req); }];
  const create = protocol === "grpc-web" ? createGrpcWebTransport : createConnectTransport;
  const payments = createClient(PaymentService, create({ baseUrl, interceptors }));
  try {
    let rateLimitRemaining = null;
    const confirmed = await payments.confirmPayment(
      { paymentId, clientSecret, paymentMethodData: { card } },
      { onHeader: (header) => { rateLimitRemaining = header.get("x-ratelimit-remaining"); } },
    );
    const retrieved = await payments.retrievePayment({ paymentId, clientSecret });
    return {
      confirmed: PaymentStatus[confirmed.status],
      amountReceived: String(confirmed.amountReceived),
      retrieved: PaymentStatus[retrieved.status],
      rateLimitRemaining,
    };
  } catch (reason) {
    const error = ConnectError.from(reason);
    return { error: error.code, message: error.rawMessage };
  }
};
`;

/** A merchant's site serving the checkout page and its bundled script, on a port (an origin) of its own. */
function startCheckoutSite(script: Buffer): Promise<Site> {
  return startSite((req, res) => {
    if (req.url === "/checkout.js") {
      res.setHeader("content-type", "text/javascript");
      res.end(script);
      return;
    }
    res.setHeader("content-type", "text/html; charset=utf-8");
    res.end('<!doctype html><title>Checkout</title><h1>Checkout</h1><script type="module" src="/checkout.js"></script>');
  });
}

let bundleDir: string;
let allowedSite: Site;
let otherSite: Site;
let service: TestService;
let browser: Browser;

beforeAll(async () => {
  bundleDir = await mkdtemp(join(tmpdir(), "checkout-bundle-"));
  const outfile = join(bundleDir, "checkout.js");
  await build({
    stdin: { contents: checkoutScript, resolveDir: repository, sourcefile: "checkout.js", loader: "js" },
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    outfile,
    logLevel: "silent",
  });
  const script = await readFile(outfile);
  allowedSite = await startCheckoutSite(script);
  otherSite = await startCheckoutSite(script);
  service = await startService({ CORS_ALLOWED_ORIGINS: allowedSite.url });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await service?.close();
  await allowedSite?.close();
  await otherSite?.close();
  if (bundleDir !== undefined) await rm(bundleDir, { recursive: true, force: true });
});

let context: BrowserContext;
beforeEach(async () => {
  context = await browser.newContext();
});
afterEach(() => context.close());

/** What the checkout page reports after trying to confirm and retrieve. */
interface CheckoutResult {
  readonly confirmed?: string;
  readonly amountReceived?: string;
  readonly retrieved?: string;
  readonly rateLimitRemaining?: string | null;
  readonly error?: number;
  readonly message?: string;
}

/**
 * A payment created by the merchant's backend (secret key), then confirmed by the checkout page
 * served from `site` with a publishable key and the payment's client_secret. Returns what the page
 * read and the payment as the backend then retrieves it.
 */
async function checkoutFrom(site: Site, protocol: "connect" | "grpc-web") {
  const merchant = await newMerchant(service.url);
  const publishableKey = await issueKey(service.url, merchant.merchantId, "sandbox", "publishable");
  const created = await createPayment(service.url, merchant, { amount: 4200, payment_method: "card" });
  expect(created.status).toBe("requires_payment_method");

  const page = await context.newPage();
  await page.goto(`${site.url}/checkout`);
  await page.waitForFunction(() => "checkout" in globalThis);
  const result = await page.evaluate(
    (args) => (globalThis as unknown as { checkout(a: typeof args): Promise<CheckoutResult> }).checkout(args),
    {
      baseUrl: service.url,
      protocol,
      apiKey: publishableKey,
      paymentId: created.payment_id as string,
      clientSecret: created.client_secret as string,
      card: { cardNumber: visaCard.card_number, cardExpMonth: "12", cardExpYear: "2035", cardCvc: "123" },
    },
  );
  return { result, payment: await retrievePayment(service.url, merchant, created.payment_id) };
}

describe("a checkout page on an allowed origin", () => {
  it.each(["connect", "grpc-web"] as const)(
    "confirms and retrieves the payment over %s, and reads the rate-limit headers",
    async (protocol) => {
      const { result, payment } = await checkoutFrom(allowedSite, protocol);
      expect(result).toEqual({
        confirmed: "SUCCEEDED",
        amountReceived: "4200",
        retrieved: "SUCCEEDED",
        rateLimitRemaining: expect.stringMatching(/^\d+$/),
      });
      expect(payment).toMatchObject({ status: "succeeded", amount_received: 4200 });
    },
  );
});

describe("saved cards on the checkout page", () => {
  it("tokenizes the card in the browser, the backend pays with the token and saves it, and a second visit pays in one click", async () => {
    const merchant = await newMerchant(service.url);
    const publishableKey = await issueKey(service.url, merchant.merchantId, "sandbox", "publishable");
    const customer = await rest(service.url, "POST", "/customers", { apiKey: merchant.apiKey, body: { email: "jane@example.com" } });
    const customerId = customer.body.customer_id as string;
    const page = await context.newPage();
    await page.goto(`${allowedSite.url}/checkout`);
    await page.waitForFunction(() => "tokenize" in globalThis);
    const token = await page.evaluate(
      (args) =>
        (
          globalThis as unknown as { tokenize(a: typeof args): Promise<{ paymentMethodId: string; last4: string; customerId: null }> }
        ).tokenize(args),
      {
        baseUrl: service.url,
        apiKey: publishableKey,
        card: { cardNumber: visaCard.card_number, cardExpMonth: "12", cardExpYear: "2035", cardCvc: "123" },
      },
    );
    expect(token).toEqual({ paymentMethodId: expect.stringMatching(/^pm_/), last4: "4242", customerId: null });

    // The backend pays with the token and asks that the card be saved for the customer.
    const first = await createPayment(service.url, merchant, {
      amount: 4200,
      confirm: true,
      customer_id: customerId,
      payment_method_id: token.paymentMethodId,
      setup_future_usage: "on_session",
    });
    expect(first).toMatchObject({ status: "succeeded", payment_method_id: token.paymentMethodId, customer_id: customerId });
    const saved = await rest(service.url, "GET", `/customers/${customerId}/payment_methods`, { apiKey: merchant.apiKey });
    expect((saved.body.data as { payment_method_id: string }[]).map((m) => m.payment_method_id)).toEqual([token.paymentMethodId]);

    // The second visit: the backend renders the saved card; one click confirms with it, no card form.
    const second = await createPayment(service.url, merchant, { amount: 1800, customer_id: customerId });
    const paid = await page.evaluate(
      (args) => (globalThis as unknown as { payWithSaved(a: typeof args): Promise<unknown> }).payWithSaved(args),
      {
        baseUrl: service.url,
        apiKey: publishableKey,
        paymentId: second.payment_id as string,
        clientSecret: second.client_secret as string,
        paymentMethodId: token.paymentMethodId,
      },
    );
    expect(paid).toEqual({ status: "SUCCEEDED", paymentMethodId: token.paymentMethodId, last4: "4242" });
    expect(await retrievePayment(service.url, merchant, second.payment_id)).toMatchObject({ status: "succeeded", amount_received: 1800 });
  });
});

describe("the same page on an origin not allowed", () => {
  it("cannot call the service: the browser stops the call at its preflight and the payment stays unconfirmed", async () => {
    const { result, payment } = await checkoutFrom(otherSite, "connect");
    // What a page sees of a call its browser refused: a network failure, connect's `unknown`, no answer.
    expect(result).toEqual({ error: Code.Unknown, message: "Failed to fetch" });
    expect(payment.status).toBe("requires_payment_method");
  });
});
