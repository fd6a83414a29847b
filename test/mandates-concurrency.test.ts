import { describe, expect, it } from "vitest";
import { visaCard } from "./support/cards.js";
import { rest, type RestResponse } from "./support/clients.js";
import { onPostgres, rows } from "./support/database.js";
import { expectRestError } from "./support/errors.js";
import { newMerchant, type TestMerchant } from "./support/merchant.js";
import { deadlocks, summary } from "./support/races.js";
import { servicePair } from "./support/running.js";
import { noPolling } from "./support/service.js";

/*
 * Merchant-initiated payments racing for one single-use mandate, sent at once to two service
 * instances sharing one PostgreSQL database: the mandate allows one charge, whichever instance takes
 * it. The embedded database serializes every statement, so the race only exists on real PostgreSQL.
 */

describe.skipIf(!onPostgres)("off-session payments racing for one single-use mandate on two instances", () => {
  const { a, instance } = servicePair(noPolling);

  /** An off-session setup of the customer's card with a single-use mandate: its payment method and mandate. */
  async function singleUseMandate(merchant: TestMerchant, customerId: string): Promise<{ paymentMethodId: string; mandateId: string }> {
    const setup = await rest(a.url, "POST", "/payments", {
      apiKey: merchant.apiKey,
      body: {
        amount: 0,
        currency: "USD",
        profile_id: merchant.profileId,
        confirm: true,
        customer_id: customerId,
        setup_future_usage: "off_session",
        customer_acceptance: { acceptance_type: "offline" },
        mandate_data: { type: "single_use" },
        payment_method_data: { card: visaCard },
      },
    });
    expect(setup.body.status).toBe("succeeded");
    return { paymentMethodId: setup.body.payment_method_id, mandateId: setup.body.mandate_id };
  }

  it("charges exactly once: one payment succeeds, the others are refused IR_16, the mandate is inactive", async () => {
    const merchant = await newMerchant(a.url);
    const deadlocksBefore = await deadlocks(a);
    const trials = 5;
    for (let trial = 0; trial < trials; trial++) {
      const customer = await rest(a.url, "POST", "/customers", { apiKey: merchant.apiKey, body: {} });
      const customerId = customer.body.customer_id as string;
      const { paymentMethodId, mandateId } = await singleUseMandate(merchant, customerId);
      const racing = 8;
      const charges: RestResponse[] = await Promise.all(
        Array.from({ length: racing }, (_, i) =>
          rest(instance(i).url, "POST", "/payments", {
            apiKey: merchant.apiKey,
            body: {
              amount: 700 + i,
              currency: "USD",
              profile_id: merchant.profileId,
              confirm: true,
              off_session: true,
              customer_id: customerId,
              payment_method_id: paymentMethodId,
            },
          }),
        ),
      );
      const won = charges.filter((r) => r.status === 200);
      expect(won, summary(charges)).toHaveLength(1);
      expect(won[0]!.body).toMatchObject({ status: "succeeded", mandate_id: mandateId });
      for (const lost of charges.filter((r) => r.status !== 200)) expectRestError(lost, 400, "IR_16");

      const charged = await rows<{ n: number }>(
        a.app.dataSource,
        "SELECT count(*)::int AS n FROM payments WHERE merchant_id = $1 AND mandate_id = $2 AND off_session",
        [merchant.merchantId, mandateId],
      );
      expect(charged[0]!.n).toBe(1);
      const mandate = await rest(a.url, "GET", `/mandates/${mandateId}`, { apiKey: merchant.apiKey });
      expect(mandate.body.status).toBe("inactive");
    }
    expect(await deadlocks(a)).toBe(deadlocksBefore);
  });
});
