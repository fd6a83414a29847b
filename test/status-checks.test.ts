import type { DescEnum } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { DisputeStatusSchema } from "../gen/paymentservice/v1/dispute_pb.js";
import { DeliveryStatusSchema } from "../gen/paymentservice/v1/event_pb.js";
import { PaymentStatusSchema } from "../gen/paymentservice/v1/payment_pb.js";
import { PayoutStatusSchema } from "../gen/paymentservice/v1/payout_pb.js";
import { RefundStatusSchema } from "../gen/paymentservice/v1/refund_pb.js";
import { enumWord } from "../src/enum-words.js";
import { visaCard as card } from "./support/cards.js";
import { rows } from "./support/database.js";
import { newMerchant } from "./support/merchant.js";
import { createPayment, retrievePayment } from "./support/payments.js";
import { runningService } from "./support/running.js";

/*
 * A status column stores only the words its resource documents (the migration StatusChecks): a
 * stored word the service does not know would read back as a null status that no guard, filter or
 * job recognises, so the database refuses it instead.
 */

/** The words of a status enum, without UNSPECIFIED. */
function wordsOf(desc: DescEnum): string[] {
  return desc.values.flatMap((value) => enumWord(desc, value.number) ?? []);
}

/** Each status column's table, and the words the API may show for it. */
const tables: [table: string, words: string[]][] = [
  ["payments", wordsOf(PaymentStatusSchema)],
  ["refunds", wordsOf(RefundStatusSchema)],
  ["disputes", wordsOf(DisputeStatusSchema)],
  ["payouts", wordsOf(PayoutStatusSchema)],
  // no_webhook_url is what an event without a delivery row shows; the table never stores it.
  ["webhook_deliveries", wordsOf(DeliveryStatusSchema).filter((word) => word !== "no_webhook_url")],
];

describe("stored statuses", () => {
  const service = runningService();

  it.each(tables)("%s.status accepts exactly the documented words", async (table, words) => {
    const [check] = await rows<{ definition: string }>(
      service.app.dataSource,
      `SELECT pg_get_constraintdef(oid) AS definition FROM pg_constraint WHERE conrelid = $1::regclass AND conname = $2 AND convalidated`,
      [table, `${table}_status`],
    );
    expect(check, `${table}_status is missing or not validated`).toBeDefined();
    const allowed = [...check!.definition.matchAll(/'([a-z_]+)'/g)].map((match) => match[1]);
    expect(allowed.sort()).toEqual([...words].sort());
  });

  it("a payment written with an unknown status is refused and keeps the status it had", async () => {
    const merchant = await newMerchant(service.url);
    const payment = await createPayment(service.url, merchant, { amount: 1000, confirm: true, payment_method_data: { card } });
    const write = service.app.dataSource.query("UPDATE payments SET status = 'canceled' WHERE payment_id = $1", [payment.payment_id]);
    await expect(write).rejects.toMatchObject({ driverError: { code: "23514", constraint: "payments_status" } });
    expect((await retrievePayment(service.url, merchant, payment.payment_id)).status).toBe("succeeded");
  });
});
