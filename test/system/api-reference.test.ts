import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.js";
import { runningService } from "../support/running.js";
import { noPolling } from "../support/service.js";

/*
 * The API reference page (/docs) as a reader sees it in a browser: rendered by Redoc from the
 * served OpenAPI document, without an API key and without any request leaving the service's port.
 */

const service = runningService(noPolling);
let browser: Browser | undefined;

beforeAll(async () => {
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
});

describe("GET /docs", () => {
  it("renders the payments section from /openapi.json with nothing fetched from elsewhere", { timeout: 60_000 }, async () => {
    const context = await browser!.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const served: string[] = [];
    page.on("requestfinished", (request) => served.push(request.url()));
    const failed: string[] = [];
    page.on("requestfailed", (request) => failed.push(`${request.url()} ${request.failure()?.errorText}`));
    const consoleErrors: string[] = [];
    page.on("console", (message) => {
      if (message.type() === "error") consoleErrors.push(message.text());
    });
    const answer = await page.goto(`${service.url}/docs`);
    expect(answer?.status()).toBe(200);

    const payments = page.locator('[data-section-id="tag/Payments"]');
    await payments.waitFor({ timeout: 20_000 });
    await expect(payments.locator("h2").first().textContent()).resolves.toBe("Payments");
    // An operation of the section, with its summary from the proto comment.
    const create = page.locator('[data-section-id="tag/Payments/operation/CreatePayment"]');
    await expect(create.textContent()).resolves.toContain("Creates a payment");
    await create.scrollIntoViewIfNeeded();

    const screenshot = join(mkdtempSync(join(tmpdir(), "api-reference-")), "docs.png");
    await page.screenshot({ path: screenshot });
    console.info(`screenshot of /docs: ${screenshot}`);
    // Offline is the point: everything loaded came from the service's own port, and nothing was even
    // tried elsewhere (Redoc's footer logo from a CDN, which the page's policy would block, is not asked for).
    expect(served.filter((url) => !url.startsWith(`${service.url}/`) && !url.startsWith("blob:"))).toEqual([]);
    expect(failed).toEqual([]);
    expect(consoleErrors).toEqual([]);
    // Titles are sentences made from the operation's name, the same way for every one.
    await expect(create.locator("h2").first().textContent()).resolves.toMatch(/^Create payment\s*$/);
    const titles = (await page.locator("[data-section-id^='tag/'] h2").allTextContents()).map((title) => title.trim());
    expect(titles).toContain("List API keys");
    expect(titles.filter((title) => title.includes("`") || /\b(Api|Url)\b/.test(title))).toEqual([]);
    await context.close();
  });
});
