import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.js";
import { rest } from "../support/clients.js";
import { threeDsScene } from "../support/three-ds.js";

/*
 * The sandbox 3D Secure flow (decisions §3) as a customer's browser goes through it: the merchant
 * sends the browser to next_action.redirect_to_url, the customer clicks Complete or Fail on the
 * service's page, and the browser comes back to the merchant's return_url with payment_id and status.
 */

const scene = threeDsScene();
let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

let context: BrowserContext;
let page: Page;
beforeEach(async () => {
  context = await browser.newContext();
  page = await context.newPage();
});
afterEach(() => context.close());

/** Clicks a button on the 3DS page and waits until the browser is back on the merchant's site. */
async function clickAndReturn(button: "Complete" | "Fail"): Promise<URL> {
  await Promise.all([page.waitForURL((url) => url.href.startsWith(scene.site.url)), page.getByRole("button", { name: button }).click()]);
  return new URL(page.url());
}

describe("3D Secure in a browser", () => {
  it("completes an automatic-capture payment and brings the customer back to return_url with its status", async () => {
    const returnUrl = `${scene.site.url}/shop/complete?order=42`;
    const { paymentId, redirectUrl } = await scene.paymentNeedingAuthentication({ return_url: returnUrl });

    const response = await page.goto(redirectUrl);
    expect(response?.status()).toBe(200);
    await expect.poll(() => page.locator("#amount").textContent()).toBe("$25.00");

    const back = await clickAndReturn("Complete");
    expect(back.pathname).toBe("/shop/complete");
    expect(Object.fromEntries(back.searchParams)).toEqual({ order: "42", payment_id: paymentId, status: "succeeded" });
    expect(scene.site.visits).toContainEqual({
      path: "/shop/complete",
      query: { order: "42", payment_id: paymentId, status: "succeeded" },
    });

    const payment = await scene.retrieve(paymentId);
    expect(payment).toMatchObject({ status: "succeeded", amount_received: 2500, amount_capturable: 0, next_action: null });
  });

  it("fails the payment with authentication_failed when the customer clicks Fail", async () => {
    const { paymentId, redirectUrl } = await scene.paymentNeedingAuthentication({ return_url: `${scene.site.url}/shop/fail` });
    await page.goto(redirectUrl);

    const back = await clickAndReturn("Fail");
    expect(back.pathname).toBe("/shop/fail");
    expect(Object.fromEntries(back.searchParams)).toEqual({ payment_id: paymentId, status: "failed" });

    const payment = await scene.retrieve(paymentId);
    expect(payment).toMatchObject({ status: "failed", error_code: "authentication_failed", amount_received: null, next_action: null });
    expect(typeof payment.error_message).toBe("string");
  });

  it("leaves a manual-capture payment in requires_capture after Complete", async () => {
    const { paymentId, redirectUrl } = await scene.paymentNeedingAuthentication({
      capture_method: "manual",
      return_url: `${scene.site.url}/shop/manual`,
    });
    await page.goto(redirectUrl);

    const back = await clickAndReturn("Complete");
    expect(Object.fromEntries(back.searchParams)).toEqual({ payment_id: paymentId, status: "requires_capture" });

    const payment = await scene.retrieve(paymentId);
    expect(payment).toMatchObject({ status: "requires_capture", amount_capturable: 2500, amount_received: null });
  });

  it("returns to the profile's return_url when the payment has none, and to the payment's when both are set", async () => {
    const updated = await rest(scene.service.url, "POST", `/merchants/${scene.merchant.merchantId}/profiles/${scene.merchant.profileId}`, {
      admin: true,
      body: { return_url: `${scene.site.url}/profile-return` },
    });
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);

    const withoutOwn = await scene.paymentNeedingAuthentication();
    await page.goto(withoutOwn.redirectUrl);
    const toProfile = await clickAndReturn("Complete");
    expect(toProfile.pathname).toBe("/profile-return");
    expect(Object.fromEntries(toProfile.searchParams)).toEqual({ payment_id: withoutOwn.paymentId, status: "succeeded" });

    const withOwn = await scene.paymentNeedingAuthentication({ return_url: `${scene.site.url}/payment-return` });
    await page.goto(withOwn.redirectUrl);
    const toPayment = await clickAndReturn("Complete");
    expect(toPayment.pathname).toBe("/payment-return");
    expect(Object.fromEntries(toPayment.searchParams)).toEqual({ payment_id: withOwn.paymentId, status: "succeeded" });
  });

  it("shows a not-valid page when the link is opened again after completion, and the payment stays as it was", async () => {
    const { paymentId, redirectUrl } = await scene.paymentNeedingAuthentication({ return_url: `${scene.site.url}/shop/again` });
    await page.goto(redirectUrl);
    await clickAndReturn("Complete");
    const before = await scene.retrieve(paymentId);
    expect(before.status).toBe("succeeded");

    const again = await page.goto(redirectUrl);
    expect(again?.status()).toBe(404);
    await expect.poll(() => page.locator("h1").textContent()).toMatch(/not valid/i);
    expect(await page.getByRole("button", { name: "Complete" }).count()).toBe(0);

    const reloaded = await page.reload();
    expect(reloaded?.status()).toBe(404);
    expect(await scene.retrieve(paymentId)).toEqual(before);
  });
});
