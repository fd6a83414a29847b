import { createServer as createHttpServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { launchChromium } from "./support/browser.js";
import { cardData } from "./support/cards.js";
import { rest } from "./support/clients.js";
import { newMerchant, type TestMerchant } from "./support/merchant.js";
import { freePort } from "./support/ports.js";
import { createPayment, retrievePayment } from "./support/payments.js";
import { startService, type TestService } from "./support/service.js";

/*
 * The sandbox 3D Secure flow (decisions §3) as a customer's browser goes through it: the merchant
 * sends the browser to next_action.redirect_to_url, the customer clicks Complete or Fail on the
 * service's page, and the browser comes back to the merchant's return_url with payment_id and status.
 */

/** payment_method_data with the 3DS test card. */
const threeDsCard = cardData("4000000000003220", new Date());

/** The merchant's site: records the query of every request the browser brings back to return_url. */
interface MerchantSite {
  readonly url: string;
  readonly visits: { path: string; query: Record<string, string> }[];
  close(): Promise<void>;
}

async function startMerchantSite(): Promise<MerchantSite> {
  const visits: { path: string; query: Record<string, string> }[] = [];
  const server: Server = createHttpServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://merchant.invalid");
    visits.push({ path: url.pathname, query: Object.fromEntries(url.searchParams) });
    res.setHeader("content-type", "text/html; charset=utf-8");
    res.end("<!doctype html><title>Merchant</title><h1>Thanks for your order</h1>");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    visits,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

let service: TestService;
let site: MerchantSite;
let browser: Browser;

beforeAll(async () => {
  const port = await freePort();
  service = await startService({ PORT: String(port), PUBLIC_BASE_URL: `http://127.0.0.1:${port}` });
  site = await startMerchantSite();
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await site?.close();
  await service?.close();
});

let context: BrowserContext;
let page: Page;
let merchant: TestMerchant;

beforeEach(async () => {
  context = await browser.newContext();
  page = await context.newPage();
  merchant = await newMerchant(service.url);
});
afterEach(() => context.close());

/** Creates and confirms a payment with the 3DS test card; it must wait in requires_action. */
async function paymentNeedingAuthentication(
  fields: { capture_method?: string; return_url?: string; amount?: number } = {},
): Promise<{ paymentId: string; redirectUrl: string }> {
  const created = await createPayment(service.url, merchant, {
    amount: 2500,
    confirm: true,
    payment_method: "card",
    payment_method_data: threeDsCard,
    ...fields,
  });
  expect(created.status).toBe("requires_action");
  expect(created.next_action).toEqual({ type: "redirect_to_url", redirect_to_url: expect.any(String) });
  const redirectUrl: string = created.next_action.redirect_to_url;
  expect(redirectUrl.startsWith(`${service.url}/3ds/`)).toBe(true);
  return { paymentId: created.payment_id, redirectUrl };
}

/** The payment as the merchant's backend retrieves it. */
const retrieve = (paymentId: string) => retrievePayment(service.url, merchant, paymentId);

/** Clicks a button on the 3DS page and waits until the browser is back on the merchant's site. */
async function clickAndReturn(button: "Complete" | "Fail"): Promise<URL> {
  await Promise.all([page.waitForURL((url) => url.href.startsWith(site.url)), page.getByRole("button", { name: button }).click()]);
  return new URL(page.url());
}

/** The URL the given button's form posts to, read from the page as a browser would. */
async function formActionOf(pageUrl: string, button: "complete" | "fail"): Promise<string> {
  const res = await fetch(pageUrl);
  expect(res.status).toBe(200);
  const html = await res.text();
  const form = [...html.matchAll(/<form\b[^>]*\baction="([^"]+)"[^>]*>([\s\S]*?)<\/form>/g)].find(([, , inner]) =>
    new RegExp(`>\\s*${button}\\s*<`, "i").test(inner!),
  );
  expect(form, html).toBeDefined();
  expect(form![0]).toMatch(/method="post"/i);
  return new URL(form![1]!.replaceAll("&amp;", "&"), pageUrl).href;
}

describe("3D Secure in a browser", () => {
  it("completes an automatic-capture payment and brings the customer back to return_url with its status", async () => {
    const returnUrl = `${site.url}/shop/complete?order=42`;
    const { paymentId, redirectUrl } = await paymentNeedingAuthentication({ return_url: returnUrl });

    const response = await page.goto(redirectUrl);
    expect(response?.status()).toBe(200);
    await expect.poll(() => page.locator("#amount").textContent()).toBe("$25.00");

    const back = await clickAndReturn("Complete");
    expect(back.pathname).toBe("/shop/complete");
    expect(Object.fromEntries(back.searchParams)).toEqual({ order: "42", payment_id: paymentId, status: "succeeded" });
    expect(site.visits).toContainEqual({ path: "/shop/complete", query: { order: "42", payment_id: paymentId, status: "succeeded" } });

    const payment = await retrieve(paymentId);
    expect(payment).toMatchObject({ status: "succeeded", amount_received: 2500, amount_capturable: 0, next_action: null });
  });

  it("fails the payment with authentication_failed when the customer clicks Fail", async () => {
    const { paymentId, redirectUrl } = await paymentNeedingAuthentication({ return_url: `${site.url}/shop/fail` });
    await page.goto(redirectUrl);

    const back = await clickAndReturn("Fail");
    expect(back.pathname).toBe("/shop/fail");
    expect(Object.fromEntries(back.searchParams)).toEqual({ payment_id: paymentId, status: "failed" });

    const payment = await retrieve(paymentId);
    expect(payment).toMatchObject({ status: "failed", error_code: "authentication_failed", amount_received: null, next_action: null });
    expect(typeof payment.error_message).toBe("string");
  });

  it("leaves a manual-capture payment in requires_capture after Complete", async () => {
    const { paymentId, redirectUrl } = await paymentNeedingAuthentication({
      capture_method: "manual",
      return_url: `${site.url}/shop/manual`,
    });
    await page.goto(redirectUrl);

    const back = await clickAndReturn("Complete");
    expect(Object.fromEntries(back.searchParams)).toEqual({ payment_id: paymentId, status: "requires_capture" });

    const payment = await retrieve(paymentId);
    expect(payment).toMatchObject({ status: "requires_capture", amount_capturable: 2500, amount_received: null });
  });

  it("returns to the profile's return_url when the payment has none, and to the payment's when both are set", async () => {
    const updated = await rest(service.url, "POST", `/merchants/${merchant.merchantId}/profiles/${merchant.profileId}`, {
      admin: true,
      body: { return_url: `${site.url}/profile-return` },
    });
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);

    const withoutOwn = await paymentNeedingAuthentication();
    await page.goto(withoutOwn.redirectUrl);
    const toProfile = await clickAndReturn("Complete");
    expect(toProfile.pathname).toBe("/profile-return");
    expect(Object.fromEntries(toProfile.searchParams)).toEqual({ payment_id: withoutOwn.paymentId, status: "succeeded" });

    const withOwn = await paymentNeedingAuthentication({ return_url: `${site.url}/payment-return` });
    await page.goto(withOwn.redirectUrl);
    const toPayment = await clickAndReturn("Complete");
    expect(toPayment.pathname).toBe("/payment-return");
    expect(Object.fromEntries(toPayment.searchParams)).toEqual({ payment_id: withOwn.paymentId, status: "succeeded" });
  });

  it("shows a not-valid page when the link is opened again after completion, and the payment stays as it was", async () => {
    const { paymentId, redirectUrl } = await paymentNeedingAuthentication({ return_url: `${site.url}/shop/again` });
    await page.goto(redirectUrl);
    await clickAndReturn("Complete");
    const before = await retrieve(paymentId);
    expect(before.status).toBe("succeeded");

    const again = await page.goto(redirectUrl);
    expect(again?.status()).toBe(404);
    await expect.poll(() => page.locator("h1").textContent()).toMatch(/not valid/i);
    expect(await page.getByRole("button", { name: "Complete" }).count()).toBe(0);

    const reloaded = await page.reload();
    expect(reloaded?.status()).toBe(404);
    expect(await retrieve(paymentId)).toEqual(before);
  });
});

describe("3D Secure without a browser", () => {
  it("gives the same outcome when the Complete form's URL is posted to directly: 303 to return_url", async () => {
    const returnUrl = `${site.url}/shop/direct`;
    const { paymentId, redirectUrl } = await paymentNeedingAuthentication({ return_url: returnUrl });
    const completeUrl = await formActionOf(redirectUrl, "complete");

    const res = await fetch(completeUrl, { method: "POST", redirect: "manual" });
    expect(res.status).toBe(303);
    const location = new URL(res.headers.get("location")!);
    expect(location.origin + location.pathname).toBe(returnUrl);
    expect(Object.fromEntries(location.searchParams)).toEqual({ payment_id: paymentId, status: "succeeded" });
    expect((await retrieve(paymentId)).status).toBe("succeeded");

    // A second post (a double click, a replay) finds nothing to authenticate and changes nothing.
    const before = await retrieve(paymentId);
    const replay = await fetch(completeUrl, { method: "POST", redirect: "manual" });
    expect(replay.status).toBe(404);
    expect(await retrieve(paymentId)).toEqual(before);
  });

  it("fails the payment when the Fail form's URL is posted to directly", async () => {
    const { paymentId, redirectUrl } = await paymentNeedingAuthentication({ return_url: `${site.url}/shop/direct-fail` });
    const failUrl = await formActionOf(redirectUrl, "fail");

    const res = await fetch(failUrl, { method: "POST", redirect: "manual" });
    expect(res.status).toBe(303);
    expect(Object.fromEntries(new URL(res.headers.get("location")!).searchParams)).toEqual({ payment_id: paymentId, status: "failed" });
    expect(await retrieve(paymentId)).toMatchObject({ status: "failed", error_code: "authentication_failed" });
  });

  it("serves the page and accepts its form without any api-key; an unknown token is not valid", async () => {
    const { paymentId, redirectUrl } = await paymentNeedingAuthentication({ return_url: `${site.url}/shop/nokey` });

    const pageRes = await fetch(redirectUrl);
    expect(pageRes.status).toBe(200);
    expect(pageRes.headers.get("content-type")).toMatch(/^text\/html/);
    expect(await pageRes.text()).toContain("$25.00");

    const unknown = new URL(redirectUrl);
    unknown.pathname = "/3ds/notARealTokenAtAll0123456789abcdefghijkl";
    expect((await fetch(unknown)).status).toBe(404);
    expect((await fetch(`${unknown.href}/complete`, { method: "POST", redirect: "manual" })).status).toBe(404);
    expect((await retrieve(paymentId)).status).toBe("requires_action");

    const completed = await fetch(await formActionOf(redirectUrl, "complete"), { method: "POST", redirect: "manual" });
    expect(completed.status).toBe(303);
    expect((await retrieve(paymentId)).status).toBe("succeeded");
  });
});
