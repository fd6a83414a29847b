import type { ServiceImpl } from "@connectrpc/connect";
import { DisputeOutcome, type SandboxService } from "../../gen/paymentservice/v1/sandbox_pb.js";
import type { App } from "../app.js";
import { merchantOf, type MerchantCaller } from "../auth/caller.js";
import { openDispute } from "../disputes/open.js";
import { assertDisputeStatus, lockDisputeWithPayment } from "../disputes/service.js";
import { writeDisputeChange } from "../disputes/store.js";
import { toDispute } from "../disputes/view.js";
import { ApiError, missingField } from "../errors.js";
import { lockPayment } from "../payments/store.js";

/** Sandbox endpoints act as the card network does in production, so production keys may not use them. */
function sandboxCaller(caller: MerchantCaller): MerchantCaller {
  if (caller.livemode) throw new ApiError("IR_22", "Sandbox endpoints need a sandbox key");
  return caller;
}

/**
 * Sandbox controls for tests (decisions §9): open a dispute on any succeeded sandbox payment, and
 * settle a challenged one as the network would. The test clock (AdvanceClock) is not built yet.
 */
export function sandboxService(app: App): Partial<ServiceImpl<typeof SandboxService>> {
  const { dataSource, clock } = app;

  return {
    async openDispute(req, ctx) {
      const caller = sandboxCaller(merchantOf(ctx));
      return dataSource.transaction(async (em) => {
        const payment = await lockPayment(em, caller, req.paymentId);
        return toDispute(await openDispute(em, app, payment, "general"));
      });
    },

    async resolveDispute(req, ctx) {
      const caller = sandboxCaller(merchantOf(ctx));
      if (req.outcome === undefined) throw missingField("outcome");
      return dataSource.transaction(async (em) => {
        const row = await lockDisputeWithPayment(em, caller, req.disputeId);
        assertDisputeStatus(row, ["challenged"], "resolved");
        row.status = req.outcome === DisputeOutcome.WON ? "won" : "lost";
        row.updated = clock.now();
        await writeDisputeChange(em, app, row, "challenged");
        return toDispute(row);
      });
    },
  };
}
