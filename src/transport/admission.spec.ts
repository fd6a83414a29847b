import { describe, expect, it } from "vitest";
import { PaymentService } from "../../gen/paymentservice/v1/payment_pb.js";
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
