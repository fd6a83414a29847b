import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectNoCardData, type SentCardData } from "../support/card-data.js";
import { serverProcessDatabase } from "../support/database.js";
import { newMerchant, type TestMerchant } from "../support/merchant.js";
import { spawnServer, type ServerProcess } from "../support/server-process.js";

/*
 * Issue 19 item 6: card numbers and CVCs never reach the log, whatever field a client puts them in.
 * The real server runs as production does (a child process, here at LOG_LEVEL=debug so every line
 * is written); card-like values are sent in every field of create-payment and of other bodies, as
 * strings and as JSON numbers, in unknown fields, in path ids, query strings and headers, over REST
 * and Connect, in bodies that parse and in bodies that do not. Then every line it printed is
 * searched for them (test/support/card-data.ts, the search the card-data suite uses).
 */

/** A Luhn-valid number of `length` digits starting with `first`, completed by its check digit. */
function luhnNumber(first: number, body: readonly number[], length: number): string {
  const digits = [first, ...body].slice(0, length - 1);
  while (digits.length < length - 1) digits.push(0);
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    // Counted from the check digit's left neighbour, every other digit from it is doubled.
    let digit = digits[digits.length - 1 - i]!;
    if (i % 2 === 0) digit = digit * 2 > 9 ? digit * 2 - 9 : digit * 2;
    sum += digit;
  }
  return [...digits, (10 - (sum % 10)) % 10].join("");
}

/** Card-like numbers of every length 13–19 and network start digit, reproducibly drawn. */
const drawn = fc.sample(
  fc
    .record({ first: fc.integer({ min: 2, max: 6 }), body: fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 18, maxLength: 18 }) })
    .chain(({ first, body }) => fc.integer({ min: 13, max: 19 }).map((length) => luhnNumber(first, body, length))),
  { numRuns: 12, seed: 19 },
);

/** The sandbox's own test cards (which a payment accepts, and so carries furthest) and the drawn ones. */
const numbers = ["4242424242424242", "5555555555554444", "378282246310005", "4000000000003220", ...drawn];

/** Distinctive CVCs, so that finding one near "cvc" can only mean it was written. */
const cvcs = ["737", "7373"];

const sent: SentCardData = { numbers, cvcs };

/** How a number is written in a field: plain, grouped by spaces or by dashes. */
function spellings(number: string): string[] {
  const groups = number.match(/.{1,4}/g)!;
  return [number, groups.join(" "), groups.join("-")];
}

/** Every path to a leaf of a JSON tree (objects only; arrays are leaves). */
function leafPaths(tree: Record<string, unknown>, prefix: string[] = []): string[][] {
  return Object.entries(tree).flatMap(([key, value]) =>
    typeof value === "object" && value !== null && !Array.isArray(value)
      ? leafPaths(value as Record<string, unknown>, [...prefix, key])
      : [[...prefix, key]],
  );
}

/** A deep copy of `tree` with the leaf at `at` replaced by `value`. */
function withLeaf(tree: Record<string, unknown>, at: readonly string[], value: unknown): Record<string, unknown> {
  const [key, ...rest] = at;
  const copy = { ...tree };
  copy[key!] = rest.length === 0 ? value : withLeaf(tree[key!] as Record<string, unknown>, rest, value);
  return copy;
}

describe("the log holds no card data, whatever field it was sent in", () => {
  let server: ServerProcess;
  let merchant: TestMerchant;
  /** Requests sent, and how many were Connect calls, so the search is known to cover logged calls. */
  const calls = { all: 0, connect: 0 };

  beforeAll(async () => {
    server = await spawnServer({ LOG_LEVEL: "debug", ...(await serverProcessDatabase()) });
    merchant = await newMerchant(server.url);
  }, 120_000);
  afterAll(() => server?.stop());

  async function send(route: string, init: { method?: string; body?: string; headers?: Record<string, string> } = {}): Promise<void> {
    const res = await fetch(server.url + route, {
      method: init.method ?? (init.body === undefined ? "GET" : "POST"),
      headers: { "content-type": "application/json", "api-key": merchant.apiKey, ...init.headers },
      body: init.body,
    });
    await res.arrayBuffer();
    // Whatever it was, the service answered it without failing on its side.
    expect(res.status, `${route} ${init.body?.slice(0, 200)}`).toBeLessThan(500);
    calls.all++;
    // A Connect GET of a method with side effects is no RPC (IR_02): only the POSTs count as Connect.
    if (route.startsWith("/paymentservice.v1.") && init.body !== undefined) calls.connect++;
  }

  /** Sends `body` with each of its fields in turn replaced by each card-like value, as a string and as a number. */
  async function sweep(route: string, body: Record<string, unknown>): Promise<void> {
    const values = [...numbers.flatMap(spellings).slice(0, 6), ...numbers.slice(4, 8), ...cvcs];
    for (const at of leafPaths(body)) {
      for (const value of values) await send(route, { body: JSON.stringify(withLeaf(body, at, value)) });
      await send(route, { body: JSON.stringify(withLeaf(body, at, Number(numbers[0]))) });
    }
    // Unknown fields holding card data, at the top and inside the card.
    await send(route, { body: JSON.stringify({ ...body, card_number: numbers[1], cvc: cvcs[0], pan: Number(numbers[2]) }) });
  }

  const card = { card_number: numbers[0], card_exp_month: "12", card_exp_year: "2035", card_cvc: cvcs[0], card_holder_name: "Jo Doe" };

  it("in every field of create-payment, over REST and Connect", async () => {
    const payment = {
      amount: 1999,
      currency: "EUR",
      profile_id: merchant.profileId,
      confirm: true,
      customer_id: "cus_none",
      description: "order 1",
      return_url: "https://shop.example/done",
      payment_method: "card",
      payment_method_type: "credit",
      capture_method: "manual",
      email: "jo@example.com",
      statement_descriptor: "SHOP",
      metadata: { order: "1" },
      payment_method_data: { card },
      customer_acceptance: { acceptance_type: "online", online: { ip_address: "127.0.0.1", user_agent: "test" } },
    };
    await sweep("/payments", payment);
    await sweep("/paymentservice.v1.PaymentService/CreatePayment", { ...payment, amount: "1999", payment_method: "PAYMENT_METHOD_CARD" });
  }, 300_000);

  it("in other bodies, path ids, query strings and headers, and in bodies that do not parse", async () => {
    await sweep("/customers", {
      name: "Jo Doe",
      email: "jo@example.com",
      phone: "+4915112345678",
      description: "vip",
      metadata: { tier: "gold" },
    });
    await sweep("/refunds", { payment_id: "pay_none", amount: 100, reason: "duplicate", metadata: { ticket: "1" } });
    for (const number of numbers) {
      for (const spelled of spellings(number)) {
        const encoded = encodeURIComponent(spelled);
        await send(`/payments/${encoded}`);
        await send(`/payments/list?customer_id=${encoded}&card_cvc=${cvcs[0]}`);
        await send(`/${encoded}/${cvcs[1]}?card_number=${encoded}`);
        await send("/health", {
          headers: { "x-request-id": spelled, "idempotency-key": spelled, "user-agent": spelled, "x-card-number": spelled },
        });
        await send("/health", { headers: { "api-key": spelled } });
      }
      // JSON that does not parse, over both protocols, and a Connect GET whose message holds the card.
      const broken = `{"payment_method_data":{"card":{"card_number":"${number}","card_cvc":"${cvcs[0]}"}},`;
      await send("/payments", { body: broken });
      await send("/paymentservice.v1.PaymentService/CreatePayment", { body: broken });
      const message = encodeURIComponent(JSON.stringify({ paymentId: number }));
      await send(`/paymentservice.v1.PaymentService/GetPayment?encoding=json&message=${message}`);
    }
  }, 300_000);

  it("finds none of it in what the server printed, though every call was logged", async () => {
    // Waiting for the exit makes sure every line it wrote has been read.
    await server.stop();
    const lines = server
      .output()
      .split("\n")
      .filter((line) => line.trim() !== "");
    const requestLines = lines.filter((line) => /"message":"request( failed)?"/.test(line));
    expect(requestLines.length).toBeGreaterThanOrEqual(calls.all);
    expect(requestLines.filter((line) => line.includes('"protocol":"connect"')).length).toBeGreaterThanOrEqual(calls.connect);
    expect(requestLines.some((line) => line.includes('"code":"IR_06"'))).toBe(true);
    expectNoCardData(lines, "the server's log", sent);
    // The figures docs/reliability.md quotes.
    console.log(
      `log redaction: ${calls.all} requests (${calls.connect} Connect POSTs), ${lines.length} lines searched, none with card data`,
    );
  });
});
