/*
 * The "limit" of `npm run bench` (issue 40): the least a server can do for a payment created with
 * confirm, on the same database, with no framework. It parses the JSON body and writes what a
 * confirmed payment needs — the payment, its event, its webhook delivery — in one statement, one
 * round trip, and answers the payment as JSON. No authentication, validation, idempotency, processor,
 * batching or logging: the service's REST create with confirm is measured against it in the same run.
 *
 * Plain JavaScript, run by `node` as the service's production build is: argv[2] is the database URL,
 * argv[3] the merchant and argv[4] its profile; it prints `listening on <url>`.
 */
import { randomBytes } from "node:crypto";
import http from "node:http";
import pg from "pg";

const [databaseUrl, merchantId, profileId] = process.argv.slice(2);
const pool = new pg.Pool({ connectionString: databaseUrl, max: 20 });

const insert = `
WITH payment AS (
  INSERT INTO payments (merchant_id, livemode, payment_id, profile_id, status, amount, currency, amount_capturable, amount_received,
                        capture_method, payment_method, card, client_secret, metadata, processor, processor_reference, created, modified_at)
  VALUES ($1, false, $2, $3, 'succeeded', $4, $5, 0, $4, 'automatic', 'card', $6, $7, '{}', 'sandbox', $8, now(), now())
  RETURNING merchant_id),
event AS (
  INSERT INTO events (event_id, merchant_id, livemode, type, object_id, profile_id, data, created)
  SELECT $9, merchant_id, false, 'payment.succeeded', $2, $3, $10, now() FROM payment
  RETURNING event_id, merchant_id, livemode, profile_id, created)
INSERT INTO webhook_deliveries (event_id, merchant_id, livemode, profile_id, status, attempts, window_attempts, next_attempt_at, deliver_until, created)
SELECT e.event_id, e.merchant_id, e.livemode, e.profile_id, 'pending', 0, 0, e.created, e.created + interval '3 days', e.created
  FROM event AS e JOIN profiles AS p ON p.profile_id = e.profile_id WHERE p.webhook_url IS NOT NULL`;

const id = (prefix) => `${prefix}_${randomBytes(18).toString("base64url")}`;

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", async () => {
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      const number = body.payment_method_data.card.card_number;
      const paymentId = id("pay");
      const payment = {
        payment_id: paymentId,
        status: "succeeded",
        amount: body.amount,
        amount_received: body.amount,
        currency: body.currency.toUpperCase(),
        profile_id: profileId,
        payment_method_data: { card: { last4: number.slice(-4) } },
      };
      const card = { last4: number.slice(-4), brand: "visa", exp_month: body.payment_method_data.card.card_exp_month, exp_year: "2030" };
      await pool.query({
        name: "limit",
        text: insert,
        values: [
          merchantId,
          paymentId,
          profileId,
          body.amount,
          payment.currency,
          card,
          `${paymentId}_secret_${randomBytes(18).toString("base64url")}`,
          `sbx_${randomBytes(18).toString("base64url")}`,
          id("evt"),
          { object: payment },
        ],
      });
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(payment));
    } catch (error) {
      res.writeHead(500, { "content-type": "text/plain" });
      res.end(String(error));
    }
  });
});

server.listen(0, "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});
process.on("SIGTERM", () => server.close(() => pool.end().then(() => process.exit(0))));
