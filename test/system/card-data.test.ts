import { toJsonString } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/paymentservice/v1/error_pb.js";
import { PaymentMethod, PaymentSchema, PaymentService, PaymentStatus, type CardInput } from "../../gen/paymentservice/v1/payment_pb.js";
import { startEmbeddedDatabase } from "../../src/db/embedded.js";
import { expectNoCardData, type SentCardData } from "../support/card-data.js";
import { rpcClient } from "../support/clients.js";
import { serverProcessDatabase } from "../support/database.js";
import { adminIssue, newMerchant, type TestMerchant } from "../support/merchant.js";
import { spawnServer, type ServerProcess } from "../support/server-process.js";

/*
 * Decisions §4 and §10 and the issue "no full card number or CVC in any table, log line or response":
 * the real server runs as `npm start` does (a child process, PORT=0, LOG_LEVEL=info); merchants pay
 * with test cards over REST and gRPC, save cards and pay with them, and send rejected cards and
 * malformed bodies; then every response,
 * every line the server printed and every row of every table are searched for the card numbers and
 * the CVCs.
 */

const expYear = String(new Date().getUTCFullYear() + 3);

/** Distinctive CVCs, so that finding one next to "cvc" can only mean it was echoed or stored. */
const cvc = "737";
const amexCvc = "7373";

/** Every number sent in this file: the test cards of decisions §3, one unsupported and one never valid. */
const cards = {
  visa: "4242424242424242",
  visaDebit: "4111111111111111",
  mastercard: "5555555555554444",
  amex: "378282246310005",
  discover: "6011111111111117",
  threeDs: "4000000000003220",
  insufficientFunds: "4000000000009995",
  declined: "4000000000000002",
  disputed: "4000000000000259",
  unsupported: "4012888888881881",
  badCheckDigit: "4242424242424241",
} as const;

/** What this file sends that must never come back. */
const sent: SentCardData = { numbers: Object.values(cards), cvcs: [cvc, amexCvc] };

/** Every row of every table of the public schema, as JSON text. */
async function dumpDatabase(url: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const tables = await client.query<{ table_name: string }>(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1",
    );
    const rows: string[] = [];
    for (const { table_name } of tables.rows) {
      const result = await client.query<{ row: string }>(`SELECT row_to_json(t)::text AS row FROM "${table_name}" t`);
      rows.push(...result.rows.map(({ row }) => `${table_name}: ${row}`));
    }
    return rows;
  } finally {
    await client.end();
  }
}

describe("card data (decisions §4)", () => {
  /**
   * Where the server keeps its data (the file's own PostgreSQL database, or a DATA_DIR of its own),
   * read back whole once the server has stopped.
   */
  let database: Awaited<ReturnType<typeof serverProcessDatabase>>;
  let server: ServerProcess;
  /** The raw body of every response the server gave in this file. */
  const responses: string[] = [];

  beforeAll(async () => {
    database = await serverProcessDatabase();
    server = await spawnServer(database);
  });
  afterAll(() => server?.stop());

  /** A REST call with a raw body; the response text is kept for the final search. */
  async function restCall(method: string, route: string, apiKey: string, body?: string) {
    const res = await fetch(server.url + route, {
      method,
      headers: { "content-type": "application/json", "api-key": apiKey },
      body,
    });
    const text = await res.text();
    responses.push(`${JSON.stringify(Object.fromEntries(res.headers))} ${text}`);
    return { status: res.status, body: JSON.parse(text) };
  }

  function cardBody(merchant: TestMerchant, number: string, extra: Record<string, unknown> = {}) {
    return JSON.stringify({
      amount: 1999,
      currency: "EUR",
      profile_id: merchant.profileId,
      confirm: true,
      payment_method: "card",
      payment_method_data: {
        card: {
          card_number: number,
          card_exp_month: "07",
          card_exp_year: expYear,
          card_cvc: number === cards.amex ? amexCvc : cvc,
          card_holder_name: "Jo Doe",
        },
      },
      ...extra,
    });
  }

  it("answers REST card payments with last4, brand and expiry only", async () => {
    const merchant = await newMerchant(server.url);
    const expected: [string, string, string][] = [
      [cards.visa, "succeeded", "visa"],
      [cards.visaDebit, "succeeded", "visa"],
      [cards.mastercard, "succeeded", "mastercard"],
      [cards.amex, "succeeded", "amex"],
      [cards.discover, "succeeded", "discover"],
      [cards.threeDs, "requires_action", "visa"],
      [cards.insufficientFunds, "failed", "visa"],
      [cards.declined, "failed", "visa"],
      [cards.disputed, "succeeded", "visa"],
    ];
    for (const [number, status, brand] of expected) {
      const res = await restCall("POST", "/payments", merchant.apiKey, cardBody(merchant, number));
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.status).toBe(status);
      expect(res.body.payment_method_data).toEqual({
        card: { last4: number.slice(-4), brand, exp_month: "07", exp_year: expYear },
      });
      const retrieved = await restCall("GET", `/payments/${res.body.payment_id}`, merchant.apiKey);
      expect(retrieved.body.payment_method_data).toEqual(res.body.payment_method_data);
    }

    // The two-step flow: create, then confirm with the card.
    const created = await restCall(
      "POST",
      "/payments",
      merchant.apiKey,
      JSON.stringify({ amount: 500, currency: "USD", profile_id: merchant.profileId }),
    );
    expect(created.status).toBe(200);
    const confirmed = await restCall(
      "POST",
      `/payments/${created.body.payment_id}/confirm`,
      merchant.apiKey,
      JSON.stringify({ payment_method: "card", payment_method_data: JSON.parse(cardBody(merchant, cards.mastercard)).payment_method_data }),
    );
    expect(confirmed.body).toMatchObject({ status: "succeeded", payment_method_data: { card: { last4: "4444", brand: "mastercard" } } });

    expectNoCardData(responses, "REST responses", sent);
  });

  it("answers gRPC card payments with the masked card only", async () => {
    const merchant = await newMerchant(server.url);
    const client = rpcClient(PaymentService, server.url, "grpc", { apiKey: merchant.apiKey });
    const card = (number: string): CardInput =>
      ({ cardNumber: number, cardExpMonth: "07", cardExpYear: expYear, cardCvc: number === cards.amex ? amexCvc : cvc }) as CardInput;
    const pay = (number: string) =>
      client.createPayment({
        amount: 2999n,
        currency: "GBP",
        profileId: merchant.profileId,
        confirm: true,
        paymentMethod: PaymentMethod.CARD,
        paymentMethodData: { card: card(number) },
      });
    const record = (reason: unknown) => {
      const error = reason as ConnectError;
      responses.push(
        `${error.rawMessage} ${JSON.stringify(error.findDetails(ErrorDetailSchema))} ${JSON.stringify(Object.fromEntries(error.metadata))}`,
      );
      return error;
    };

    for (const [number, status] of [
      [cards.visa, PaymentStatus.SUCCEEDED],
      [cards.amex, PaymentStatus.SUCCEEDED],
      [cards.declined, PaymentStatus.FAILED],
      [cards.threeDs, PaymentStatus.REQUIRES_ACTION],
    ] as const) {
      const payment = await pay(number);
      responses.push(toJsonString(PaymentSchema, payment));
      expect(payment.status).toBe(status);
      expect(payment.paymentMethodData?.card?.last4).toBe(number.slice(-4));
    }

    const unsupported = record(await pay(cards.unsupported).catch((e: unknown) => e));
    expect(unsupported.findDetails(ErrorDetailSchema)[0]?.code).toBe("IR_05");
    expect(unsupported.rawMessage).toMatch(/card not supported in sandbox/);

    const expired = record(
      await client
        .createPayment({
          amount: 100n,
          currency: "GBP",
          profileId: merchant.profileId,
          confirm: true,
          paymentMethod: PaymentMethod.CARD,
          paymentMethodData: { card: { ...card(cards.visa), cardExpMonth: "01", cardExpYear: "2020" } },
        })
        .catch((e: unknown) => e),
    );
    expect(expired.findDetails(ErrorDetailSchema)[0]?.code).toBe("IR_16");

    expectNoCardData(responses, "gRPC responses", sent);
  });

  it("rejects unsupported, expired and malformed cards with a 400 that does not repeat them", async () => {
    const merchant = await newMerchant(server.url);
    const rejected = async (body: string) => {
      const res = await restCall("POST", "/payments", merchant.apiKey, body);
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      return res.body.error.message as string;
    };
    const base = JSON.parse(cardBody(merchant, cards.visa));
    const withCard = (card: Record<string, unknown>) =>
      JSON.stringify({ ...base, payment_method_data: { card: { ...base.payment_method_data.card, ...card } } });

    expect(await rejected(cardBody(merchant, cards.unsupported))).toMatch(/card not supported in sandbox, use a test card/);
    expect(await rejected(withCard({ card_exp_month: "01", card_exp_year: "2020" }))).toMatch(/expired/);
    expect(await rejected(withCard({ card_number: cards.badCheckDigit }))).toMatch(/card_number/);
    expect(await rejected(withCard({ card_number: "4242-4242-4242-4242" }))).toMatch(/card_number/);
    expect(await rejected(withCard({ card_cvc: "73" }))).toMatch(/card_cvc/);
    // Wrong JSON types for the card fields, the card given as a bare string, misspelt keys, broken JSON.
    expect(await rejected(withCard({ card_number: Number(cards.visa) }))).toMatch(/card_number/);
    expect(await rejected(withCard({ card_cvc: Number(cvc) }))).toMatch(/card_cvc/);
    expect(await rejected(JSON.stringify({ ...base, payment_method_data: { card: cards.visa } }))).toMatch(/payment_method_data\.card/);
    expect(await rejected(JSON.stringify({ ...base, payment_method_data: { card: { number: cards.visa, cvc } } }))).toMatch(/number/);
    expect(await rejected(JSON.stringify({ ...base, card_number: cards.visa }))).toMatch(/card_number/);
    expect(await rejected(`${cardBody(merchant, cards.visa).slice(0, -1)},}`)).toMatch(/not valid JSON/);

    // The same mistakes through the Connect protocol's JSON, which has its own parser.
    const connect = async (card: unknown) => {
      const res = await fetch(`${server.url}/paymentservice.v1.PaymentService/CreatePayment`, {
        method: "POST",
        headers: { "content-type": "application/json", "api-key": merchant.apiKey },
        body: JSON.stringify({ amount: "100", currency: "USD", profileId: merchant.profileId, confirm: true, paymentMethodData: { card } }),
      });
      responses.push(await res.text());
      expect(res.status).toBe(400);
    };
    await connect({ cardNumber: Number(cards.visa), cardExpMonth: "07", cardExpYear: expYear, cardCvc: cvc });
    await connect({ cardNumber: cards.visa, cardExpMonth: "07", cardExpYear: expYear, cardCvc: Number(cvc) });
    await connect(cards.visa);

    expectNoCardData(responses, "responses to rejected requests", sent);
  });

  it("saves cards (a customer's, a token made with a publishable key, a setup's) and pays with them, answering the masked card only", async () => {
    const merchant = await newMerchant(server.url);
    const publishable = (await adminIssue(server.url, merchant.merchantId, { kind: "publishable" })).api_key as string;
    const customer = await restCall("POST", "/customers", merchant.apiKey, "{}");
    const saveBody = (number: string, extra: Record<string, unknown> = {}) =>
      JSON.stringify({
        payment_method: "card",
        card: { card_number: number, card_exp_month: "07", card_exp_year: expYear, card_cvc: number === cards.amex ? amexCvc : cvc },
        ...extra,
      });
    const saved = await restCall(
      "POST",
      "/payment_methods",
      merchant.apiKey,
      saveBody(cards.amex, { customer_id: customer.body.customer_id }),
    );
    expect(saved.status, JSON.stringify(saved.body)).toBe(200);
    expect(saved.body.card).toMatchObject({ last4: "0005", brand: "amex", exp_month: "07", exp_year: expYear });
    const token = await restCall("POST", "/payment_methods", publishable, saveBody(cards.mastercard));
    expect(token.status, JSON.stringify(token.body)).toBe(200);
    await restCall("GET", `/payment_methods/${saved.body.payment_method_id}`, merchant.apiKey);
    await restCall("GET", `/customers/${customer.body.customer_id}/payment_methods`, merchant.apiKey);
    for (const paymentMethodId of [saved.body.payment_method_id, token.body.payment_method_id]) {
      const paid = await restCall(
        "POST",
        "/payments",
        merchant.apiKey,
        JSON.stringify({ amount: 700, currency: "USD", profile_id: merchant.profileId, confirm: true, payment_method_id: paymentMethodId }),
      );
      expect(paid.body).toMatchObject({ status: "succeeded", payment_method_id: paymentMethodId });
    }
    // A setup saves the card it pays with (sent with its CVC), with a mandate; a charge off-session uses it.
    const setup = await restCall(
      "POST",
      "/payments",
      merchant.apiKey,
      JSON.stringify({
        amount: 0,
        currency: "USD",
        profile_id: merchant.profileId,
        confirm: true,
        customer_id: customer.body.customer_id,
        setup_future_usage: "off_session",
        customer_acceptance: { acceptance_type: "offline" },
        payment_method_data: { card: { card_number: cards.discover, card_exp_month: "07", card_exp_year: expYear, card_cvc: cvc } },
      }),
    );
    expect(setup.body).toMatchObject({ status: "succeeded", mandate_id: expect.stringMatching(/^man_/) });
    const charged = await restCall(
      "POST",
      "/payments",
      merchant.apiKey,
      JSON.stringify({
        amount: 900,
        currency: "USD",
        profile_id: merchant.profileId,
        confirm: true,
        off_session: true,
        customer_id: customer.body.customer_id,
        payment_method_id: setup.body.payment_method_id,
      }),
    );
    expect(charged.body).toMatchObject({ status: "succeeded", off_session: true });
    await restCall("GET", `/mandates/${setup.body.mandate_id}`, merchant.apiKey);
    // Refused saves do not repeat what they were sent.
    const refused = await restCall("POST", "/payment_methods", merchant.apiKey, saveBody(cards.unsupported));
    expect(refused.status).toBe(400);

    expectNoCardData(responses, "responses about saved cards", sent);
  });

  it("writes no card number or CVC to the log or to any table", async () => {
    // Waiting for the exit makes sure every line the server wrote has been read.
    await server.stop();
    const lines = server
      .output()
      .split("\n")
      .filter((line) => line.trim() !== "");
    const calls = lines.filter((line) => line.includes('"procedure":"/paymentservice.v1.PaymentService/CreatePayment"'));
    expect(calls.some((line) => line.includes('"protocol":"rest"'))).toBe(true);
    expect(calls.some((line) => /"protocol":"(connect|grpc|grpc-web)"/.test(line))).toBe(true);
    expectNoCardData(lines, "the server's output", sent);

    const db = "DATA_DIR" in database ? await startEmbeddedDatabase(database.DATA_DIR, 2) : undefined;
    try {
      const rows = await dumpDatabase("DATABASE_URL" in database ? database.DATABASE_URL : db!.url);
      expect(rows.filter((row) => row.startsWith("payments: ")).length).toBeGreaterThan(0);
      expect(rows.some((row) => row.startsWith("payments: ") && /"last4": ?"4242"/.test(row))).toBe(true);
      expectNoCardData(rows, "the database", sent);
    } finally {
      await db?.close();
    }
  });
});

describe("starting on PORT=0", () => {
  it("prints the bound URL in its listening line, and a working first call for the bootstrapped sandbox key", async () => {
    const server = await spawnServer({ DATA_DIR: ":memory:" });
    try {
      expect(server.url).toMatch(/^http:\/\/[^:]+:[1-9][0-9]*$/);
      // On an empty embedded database the server prints a sandbox key and a curl line to try it.
      const tryIt = /curl -H "api-key: ([^"]+)" (\S+)/;
      await expect.poll(() => tryIt.test(server.output()), { timeout: 30_000 }).toBe(true);
      const [, apiKey, healthUrl] = server.output().match(tryIt)!;
      const res = await fetch(healthUrl!, { headers: { "api-key": apiKey! } });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { status: string }).status).toBe("ok");
    } finally {
      await server.stop();
    }
  }, 60_000);
});
