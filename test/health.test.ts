import { beforeAll, describe, expect, it } from "vitest";
import { HealthService } from "../gen/paymentservice/v1/health_pb.js";
import { Environment } from "../gen/paymentservice/v1/common_pb.js";
import { rest, rpcClient } from "./support/clients.js";
import { newMerchant, type TestMerchant } from "./support/merchant.js";
import { runningService } from "./support/running.js";

const service = runningService();
let merchant: TestMerchant;

beforeAll(async () => {
  merchant = await newMerchant(service.url);
});

describe("health", () => {
  it("answers 200 over REST with a valid key", async () => {
    const res = await rest(service.url, "GET", "/health", { apiKey: merchant.apiKey });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: "ok", merchant_id: merchant.merchantId, environment: "sandbox" });
  });

  it.each(["connect", "grpc", "grpc-web"] as const)("answers the same over %s", async (protocol) => {
    const res = await rpcClient(HealthService, service.url, protocol, { apiKey: merchant.apiKey }).check({});
    expect(res.status).toBe("ok");
    expect(res.merchantId).toBe(merchant.merchantId);
    expect(res.environment).toBe(Environment.SANDBOX);
  });
});
