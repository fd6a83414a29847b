import { afterAll, beforeAll, beforeEach, expect } from "vitest";
import { cardData } from "./cards.js";
import { newMerchant, type TestMerchant } from "./merchant.js";
import { freePort } from "./ports.js";
import { createPayment, retrievePayment } from "./payments.js";
import { startService, type TestService } from "./service.js";
import { type Site, startSite } from "./site.js";

/*
 * The scene of the sandbox 3D Secure flow (decisions §3): the service on a public URL the browser
 * can reach, a merchant's site to come back to, and a merchant of each test's own; what the flow's
 * suites share, with and without a browser.
 */

/** payment_method_data with the 3DS test card. */
const threeDsCard = cardData("4000000000003220", new Date());

/** The merchant's site: records the query of every request the browser brings back to return_url. */
export interface MerchantSite extends Site {
  readonly visits: { path: string; query: Record<string, string> }[];
}

async function startMerchantSite(): Promise<MerchantSite> {
  const visits: { path: string; query: Record<string, string> }[] = [];
  const site = await startSite((req, res) => {
    const url = new URL(req.url ?? "/", "http://merchant.invalid");
    visits.push({ path: url.pathname, query: Object.fromEntries(url.searchParams) });
    res.setHeader("content-type", "text/html; charset=utf-8");
    res.end("<!doctype html><title>Merchant</title><h1>Thanks for your order</h1>");
  });
  return { ...site, visits };
}

/** The 3DS scene of the calling file: started before its tests, a fresh merchant before each. */
export interface ThreeDsScene {
  readonly service: TestService;
  readonly site: MerchantSite;
  readonly merchant: TestMerchant;
  /** Creates and confirms a payment with the 3DS test card; it must wait in requires_action. */
  paymentNeedingAuthentication(fields?: { capture_method?: string; return_url?: string; amount?: number }): Promise<{
    paymentId: string;
    redirectUrl: string;
  }>;
  /** The payment as the merchant's backend retrieves it. */
  retrieve(paymentId: string): Promise<Awaited<ReturnType<typeof retrievePayment>>>;
}

/** Starts the scene in beforeAll (closed in afterAll) and makes a merchant before each test. */
export function threeDsScene(): ThreeDsScene {
  let service: TestService | undefined;
  let site: MerchantSite | undefined;
  let merchant: TestMerchant | undefined;
  beforeAll(async () => {
    const port = await freePort();
    service = await startService({ PORT: String(port), PUBLIC_BASE_URL: `http://127.0.0.1:${port}` });
    site = await startMerchantSite();
  });
  afterAll(async () => {
    await site?.close();
    await service?.close();
  });
  beforeEach(async () => {
    merchant = await newMerchant(service!.url);
  });
  return {
    get service() {
      return service!;
    },
    get site() {
      return site!;
    },
    get merchant() {
      return merchant!;
    },
    async paymentNeedingAuthentication(fields = {}) {
      const created = await createPayment(service!.url, merchant!, {
        amount: 2500,
        confirm: true,
        payment_method: "card",
        payment_method_data: threeDsCard,
        ...fields,
      });
      expect(created.status).toBe("requires_action");
      expect(created.next_action).toEqual({ type: "redirect_to_url", redirect_to_url: expect.any(String) });
      const redirectUrl: string = created.next_action.redirect_to_url;
      expect(redirectUrl.startsWith(`${service!.url}/3ds/`)).toBe(true);
      return { paymentId: created.payment_id, redirectUrl };
    },
    retrieve: (paymentId) => retrievePayment(service!.url, merchant!, paymentId),
  };
}

/** The URL the given button's form posts to, read from the page as a browser would. */
export async function formActionOf(pageUrl: string, button: "complete" | "fail"): Promise<string> {
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
