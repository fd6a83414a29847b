import { describe, expect, it } from "vitest";
import { reapSandboxBooks, sandboxBooksRetentionDays } from "../src/processors/sandbox-books.js";
import { cardData } from "./support/cards.js";
import { newMerchant } from "./support/merchant.js";
import { createPayment } from "./support/payments.js";
import { runningService } from "./support/running.js";

/*
 * The sandbox processor's books (processors/sandbox-books.ts) keep every call's first answer for a
 * week, then the upkeep removes them, so the table does not grow with every payment ever made.
 */

const service = runningService();

/** The idempotency keys of the books' calls for a merchant. */
async function bookedKeys(merchantId: string): Promise<string[]> {
  const rows: { idempotency_key: string }[] = await service.app.dataSource.query(
    "SELECT idempotency_key FROM sandbox_processor_calls WHERE idempotency_key LIKE $1 ORDER BY idempotency_key",
    [`${merchantId}:%`],
  );
  return rows.map((row) => row.idempotency_key);
}

describe("the sandbox processor's books", () => {
  it("keep a call for a week, and are reaped after", async () => {
    const merchant = await newMerchant(service.url);
    const fresh = await createPayment(service.url, merchant, {
      confirm: true,
      payment_method_data: cardData("4242424242424242", new Date()),
    });
    const old = await createPayment(service.url, merchant, {
      confirm: true,
      payment_method_data: cardData("4242424242424242", new Date()),
    });
    expect([fresh.status, old.status]).toEqual(["succeeded", "succeeded"]);
    const [freshKey] = await bookedKeys(`${merchant.merchantId}:${fresh.payment_id}`);
    const [oldKey] = await bookedKeys(`${merchant.merchantId}:${old.payment_id}`);
    await service.app.dataSource.query(
      `UPDATE sandbox_processor_calls SET created = now() - interval '${sandboxBooksRetentionDays} days' - interval '1 minute' WHERE idempotency_key = $1`,
      [oldKey],
    );

    expect(await reapSandboxBooks(service.app.dataSource)).toBeGreaterThanOrEqual(1);
    expect(await bookedKeys(merchant.merchantId)).toEqual([freshKey]);
    // Nothing else is old enough: a second run finds nothing of this merchant's.
    await reapSandboxBooks(service.app.dataSource);
    expect(await bookedKeys(merchant.merchantId)).toEqual([freshKey]);
  });
});
