import type { ServiceImpl } from "@connectrpc/connect";
import { Environment } from "../../gen/paymentservice/v1/common_pb.js";
import type { HealthService } from "../../gen/paymentservice/v1/health_pb.js";
import { merchantOf } from "../auth/caller.js";

/** Health check: reaching the handler already proves the service is up and the key valid. */
export function healthService(): ServiceImpl<typeof HealthService> {
  return {
    check(_req, ctx) {
      const caller = merchantOf(ctx);
      return {
        status: "ok",
        merchantId: caller.merchantId,
        environment: caller.livemode ? Environment.PRODUCTION : Environment.SANDBOX,
      };
    },
  };
}
