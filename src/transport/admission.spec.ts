import { describe, expect, it } from "vitest";
import type { DescMethod } from "@bufbuild/protobuf";
import { PaymentMethodService } from "../../gen/paymentservice/v1/payment_method_pb.js";
import { PaymentService } from "../../gen/paymentservice/v1/payment_pb.js";
import type { MerchantCaller } from "../auth/caller.js";
import { systemClock } from "../clock.js";
import { ApiError } from "../errors.js";
import { MemoryCounter } from "../rate-limits/counter.js";
import { RateLimiter } from "../rate-limits/limiter.js";
import { createAdmission } from "./admission.js";

/*
 * While the database's waiting line is full (DATABASE_MAX_WAITING calls wait for a connection), a call
 * is refused before anything of it waits on the database: authentication would join the line.
 * test/faults/outages.fault.ts shows the line stay bounded against a frozen database.
 */

const method = PaymentService.method.createPayment;
const header = new Headers({ "api-key": "sk_test_x" });

function admission(saturated: boolean, authenticated: string[]) {
  return createAdmission({
    authenticate: async () => {
      authenticated.push(method.name);
      return { kind: "admin" };
    },
    rateLimiter: new RateLimiter(100, new MemoryCounter(() => Date.now()), systemClock),
    adminLimiter: new RateLimiter(100, new MemoryCounter(() => Date.now()), systemClock, "admin"),
    cardTestingLimiter: new RateLimiter(100, new MemoryCounter(() => Date.now()), systemClock, "card_testing"),
    isPublic: () => false,
    databaseSaturated: () => saturated,
  });
}

describe("admission while the database's waiting line is full", () => {
  it("refuses a call 503 SU_01 without authenticating it", async () => {
    const authenticated: string[] = [];
    const refusal = await admission(true, authenticated)(method, header, "127.0.0.1").catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(ApiError);
    expect((refusal as ApiError).code).toBe("SU_01");
    expect(authenticated).toEqual([]);
  });

  it("admits calls again once the line has room", async () => {
    const authenticated: string[] = [];
    await admission(false, authenticated)(method, header, "127.0.0.1");
    expect(authenticated).toEqual([method.name]);
  });
});

/*
 * Card testing (decisions §10): a browser's publishable key can tokenize cards and confirm payments,
 * which is what a card tester scripts to try stolen numbers; those calls are limited per client
 * address, whatever the key's own limit leaves.
 */
describe("the card-testing limit", () => {
  const limit = 2;

  /** Admission of a merchant calling with a publishable or a secret key, the card-testing limit at `limit`. */
  function merchantAdmission(publishable: boolean) {
    const caller: MerchantCaller = { kind: "merchant", merchantId: "mer_1", livemode: false, publishable, keyId: "key_1" };
    return createAdmission({
      authenticate: async () => caller,
      rateLimiter: new RateLimiter(100, new MemoryCounter(() => Date.now()), systemClock),
      adminLimiter: new RateLimiter(100, new MemoryCounter(() => Date.now()), systemClock, "admin"),
      cardTestingLimiter: new RateLimiter(limit, new MemoryCounter(() => Date.now()), systemClock, "card_testing"),
      isPublic: () => false,
      databaseSaturated: () => false,
    });
  }

  const refusalOf = (admit: ReturnType<typeof merchantAdmission>, called: DescMethod, client: string) =>
    admit(called, header, client).then(
      () => undefined,
      (error: unknown) => error as { code?: string; message: string },
    );

  it("refuses a publishable key's tokenizations and confirmations from one address beyond the limit, RL_01", async () => {
    const admit = merchantAdmission(true);
    expect(await refusalOf(admit, PaymentMethodService.method.createPaymentMethod, "10.0.0.1")).toBeUndefined();
    expect(await refusalOf(admit, PaymentService.method.confirmPayment, "10.0.0.1")).toBeUndefined();
    const refused = await refusalOf(admit, PaymentMethodService.method.createPaymentMethod, "10.0.0.1");
    expect(refused?.message).toContain("card tokenizations and confirmations per minute");
    // Another address has its own count; the key's other calls are not counted.
    expect(await refusalOf(admit, PaymentMethodService.method.createPaymentMethod, "10.0.0.2")).toBeUndefined();
    expect(await refusalOf(admit, PaymentService.method.retrievePayment, "10.0.0.1")).toBeUndefined();
  });

  it("does not count a secret key's calls", async () => {
    const admit = merchantAdmission(false);
    for (let i = 0; i < limit + 3; i++)
      expect(await refusalOf(admit, PaymentMethodService.method.createPaymentMethod, "10.0.0.1")).toBeUndefined();
  });
});
