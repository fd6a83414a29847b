import { connect } from "node:net";
import { describe, expect, it } from "vitest";
import { visaCard } from "./support/cards.js";
import type { JsonBody } from "./support/clients.js";
import { newMerchant, issueKey } from "./support/merchant.js";
import { createPayment } from "./support/payments.js";
import { runningInstance, runningService } from "./support/running.js";

/*
 * CORS as a browser meets it over the wire (docs/cors.md): preflights answered at once without an
 * API key, and the headers of actual answers over REST and Connect, for an allowed origin, another
 * origin and a service with no origins configured. The Chromium test (browser-checkout.test.ts)
 * drives a real browser through the same.
 */

const shop = "https://shop.example";
const evil = "https://evil.example";
const service = runningService({ CORS_ALLOWED_ORIGINS: `${shop}, http://127.0.0.1:5173` });

const confirmRpc = "/paymentservice.v1.PaymentService/ConfirmPayment";

/** A preflight as a browser sends it before a cross-origin call with an API key. */
function preflight(url: string, path: string, origin: string, method = "POST"): Promise<Response> {
  return fetch(url + path, {
    method: "OPTIONS",
    headers: { origin, "access-control-request-method": method, "access-control-request-headers": "api-key,content-type" },
  });
}

/** The access-control-* headers of an answer: none means the browser will not let the page read it. */
function corsHeadersOf(res: Response): string[] {
  return [...res.headers.keys()].filter((name) => name.startsWith("access-control-"));
}

/** A payment awaiting confirmation, its client_secret, and a publishable key of its merchant. */
async function checkoutScene() {
  const merchant = await newMerchant(service.url);
  const publishableKey = await issueKey(service.url, merchant.merchantId, "sandbox", "publishable");
  const payment = await createPayment(service.url, merchant, { amount: 1250, payment_method: "card" });
  return { paymentId: payment.payment_id as string, clientSecret: payment.client_secret as string, publishableKey };
}

describe("preflight from an allowed origin", () => {
  it.each([
    ["REST confirm", "/payments/pay_x/confirm", "POST"],
    ["REST retrieve", "/payments/pay_x", "GET"],
    ["Connect confirm", confirmRpc, "POST"],
    ["REST health", "/health", "GET"],
  ])("%s: 204 with the origin, methods, headers, Vary and max-age, without an API key", async (_, path, method) => {
    const res = await preflight(service.url, path, shop, method);
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe(shop);
    expect(res.headers.get("access-control-allow-methods")).toContain(method);
    expect(res.headers.get("access-control-allow-headers")?.split(", ")).toEqual(
      expect.arrayContaining(["api-key", "content-type", "connect-protocol-version", "x-grpc-web", "x-idempotency-key"]),
    );
    expect(res.headers.get("vary")).toBe("Origin");
    expect(Number(res.headers.get("access-control-max-age"))).toBeGreaterThan(0);
    expect(res.headers.has("x-ratelimit-limit")).toBe(false);
    expect(await res.text()).toBe("");
  });

  it.each([
    ["a secret-key REST route", "/payments"],
    ["a secret-key RPC", "/paymentservice.v1.CustomerService/CreateCustomer"],
    ["an unknown path", "/no/such/path"],
    ["the 3DS page", "/3ds/whatever/complete"],
    ["a path with a card number", "/payments/4242424242424242"],
  ])("on %s: 204 without any CORS header, so the browser refuses the call", async (_, path) => {
    const res = await preflight(service.url, path, shop);
    expect(res.status).toBe(204);
    expect(corsHeadersOf(res)).toEqual([]);
    expect(res.headers.get("vary")).toBe("Origin");
  });
});

/** Sends raw HTTP/1.1 bytes and returns the answer's head once the server has answered (or closed). */
function rawHead(url: string, request: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(request));
    let received = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => {
      received += chunk;
      const end = received.indexOf("\r\n\r\n");
      if (end !== -1) {
        socket.destroy();
        resolve(received.slice(0, end).toLowerCase());
      }
    });
    socket.on("error", reject);
  });
}

describe("preflight on the connection", () => {
  // One instance whatever the topology: what this instance's port does with its connection; a load
  // balancer in front keeps its own connection to the client, whose fate it decides.
  const service = runningInstance({ CORS_ALLOWED_ORIGINS: `${shop}, http://127.0.0.1:5173` });

  it("keeps an HTTP/1.1 connection open, but closes one whose preflight declares a body it will not read", async () => {
    const head = (extra: string) =>
      rawHead(
        service.url,
        `OPTIONS /payments/pay_x/confirm HTTP/1.1\r\nhost: x\r\norigin: ${shop}\r\naccess-control-request-method: POST\r\n${extra}\r\n`,
      );
    const plainPreflight = await head("");
    expect(plainPreflight).toMatch(/^http\/1\.1 204/);
    expect(plainPreflight).not.toContain("connection: close");

    const withBody = await head("content-length: 10485760\r\n");
    expect(withBody).toMatch(/^http\/1\.1 204/);
    expect(withBody).toContain(`access-control-allow-origin: ${shop}`);
    expect(withBody).toContain("connection: close");
  });
});

describe("preflight from another origin", () => {
  it("gets no CORS header: the OPTIONS is refused as any other method the path does not take (405 IR_03, or 404 IR_02)", async () => {
    const expected = { "/payments/pay_x/confirm": [405, "IR_03"], [confirmRpc]: [405, "IR_03"], "/no/such/path": [404, "IR_02"] };
    for (const [path, [status, code]] of Object.entries(expected)) {
      const res = await preflight(service.url, path, evil);
      expect(res.status, path).toBe(status);
      expect(corsHeadersOf(res), path).toEqual([]);
      const body = (await res.json()) as JsonBody;
      expect(body.error?.code ?? body.code, `${path}: ${JSON.stringify(body)}`).toBe(path === confirmRpc ? "unimplemented" : code);
    }
  });
});

describe("actual answers", () => {
  it("REST confirm and retrieve with a publishable key and client_secret: the origin allowed, the needed headers exposed", async () => {
    const { paymentId, clientSecret, publishableKey } = await checkoutScene();
    const confirmed = await fetch(`${service.url}/payments/${paymentId}/confirm`, {
      method: "POST",
      headers: { origin: shop, "api-key": publishableKey, "content-type": "application/json", "x-idempotency-key": `c-${paymentId}` },
      body: JSON.stringify({ client_secret: clientSecret, payment_method_data: { card: visaCard } }),
    });
    expect(confirmed.status).toBe(200);
    expect(((await confirmed.json()) as JsonBody).status).toBe("succeeded");
    expect(confirmed.headers.get("access-control-allow-origin")).toBe(shop);
    expect(confirmed.headers.get("vary")).toBe("Origin");
    const exposed = confirmed.headers.get("access-control-expose-headers")?.split(", ");
    expect(exposed).toEqual(
      expect.arrayContaining(["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "idempotent-replayed"]),
    );
    expect(exposed).not.toContain("x-request-id");
    expect(confirmed.headers.has("x-ratelimit-remaining")).toBe(true);

    const retrieved = await fetch(`${service.url}/payments/${paymentId}?client_secret=${encodeURIComponent(clientSecret)}`, {
      headers: { origin: shop, "api-key": publishableKey },
    });
    expect(retrieved.status).toBe(200);
    expect(((await retrieved.json()) as JsonBody).status).toBe("succeeded");
    expect(retrieved.headers.get("access-control-allow-origin")).toBe(shop);
  });

  it("Connect: the answer and an error answer (wrong client_secret) are readable by the allowed origin", async () => {
    const { paymentId, clientSecret, publishableKey } = await checkoutScene();
    const call = (secret: string, origin: string) =>
      fetch(service.url + confirmRpc, {
        method: "POST",
        headers: { origin, "api-key": publishableKey, "content-type": "application/json", "connect-protocol-version": "1" },
        body: JSON.stringify({
          paymentId,
          clientSecret: secret,
          paymentMethodData: { card: { cardNumber: visaCard.card_number, cardExpMonth: "12", cardExpYear: "2035", cardCvc: "123" } },
        }),
      });

    const refused = await call(`${clientSecret}x`, shop);
    expect(refused.status).toBe(403);
    expect(refused.headers.get("access-control-allow-origin")).toBe(shop);
    expect(refused.headers.get("access-control-expose-headers")).toContain("grpc-status-details-bin");

    // CORS only tells the browser what a page may read; the service still answers the call.
    const fromElsewhere = await call(`${clientSecret}x`, evil);
    expect(fromElsewhere.status).toBe(403);
    expect(corsHeadersOf(fromElsewhere)).toEqual([]);
    expect(fromElsewhere.headers.get("vary")).toBe("Origin");
    await fromElsewhere.body?.cancel();

    const confirmed = await call(clientSecret, shop);
    expect(confirmed.status).toBe(200);
    expect(((await confirmed.json()) as JsonBody).status).toBe("PAYMENT_STATUS_SUCCEEDED");
    expect(confirmed.headers.get("access-control-allow-origin")).toBe(shop);
  });

  it("a secret-key route answers an allowed origin without CORS headers", async () => {
    const merchant = await newMerchant(service.url);
    const res = await fetch(`${service.url}/customers/list`, { headers: { origin: shop, "api-key": merchant.apiKey } });
    expect(res.status).toBe(200);
    expect(corsHeadersOf(res)).toEqual([]);
  });
});

describe("without CORS_ALLOWED_ORIGINS", () => {
  const plain = runningService();

  it("no answer carries a CORS header, and a preflight is refused as before (405 IR_03)", async () => {
    const res = await preflight(plain.url, "/payments/pay_x/confirm", shop);
    expect(res.status).toBe(405);
    expect(((await res.json()) as JsonBody).error.code).toBe("IR_03");
    expect(corsHeadersOf(res)).toEqual([]);
    expect(res.headers.has("vary")).toBe(false);

    const health = await fetch(`${plain.url}/health`, { headers: { origin: shop } });
    expect(corsHeadersOf(health)).toEqual([]);
    expect(health.headers.has("vary")).toBe(false);
  });
});
