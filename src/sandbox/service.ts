import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { DisputeOutcome, type SandboxService } from "../../gen/paymentservice/v1/sandbox_pb.js";
import type { App } from "../app.js";
import { merchantOf } from "../auth/caller.js";
import { openDispute } from "../disputes/open.js";
import { assertDisputeStatus, lockDisputeWithPayment } from "../disputes/service.js";
import { writeDisputeChange } from "../disputes/store.js";
import { toDispute } from "../disputes/view.js";
import { ApiError, invalidField, missingField } from "../errors.js";
import { lockPayment } from "../payments/store.js";

/** Longest single step of the test clock: ten years. */
const maxAdvanceSeconds = 10 * 365 * 86_400;

/**
 * Sandbox controls for tests (decisions §4, §9): move the shared test clock, open a dispute on any
 * succeeded sandbox payment, and settle a challenged one as the network would. The dispute controls
 * stand in for the card network, so their access rule admits sandbox secret keys only.
 */
export function sandboxService(app: App): ServiceImpl<typeof SandboxService> {
  const { dataSource, clock } = app;

  return {
    async advanceClock(req) {
      if (app.testClock === undefined) {
        throw new ApiError("IR_16", "The test clock is off: start the service with SANDBOX_TEST_CLOCK=true to move time");
      }
      if (req.seconds === undefined) throw missingField("seconds");
      if (req.seconds < 1n || req.seconds > BigInt(maxAdvanceSeconds)) {
        throw invalidField("seconds", `expected 1 to ${maxAdvanceSeconds}`);
      }
      const now = await app.testClock.advance(Number(req.seconds));
      app.jobs.wake();
      return { now: timestampFromDate(now) };
    },

    async openDispute(req, ctx) {
      const caller = merchantOf(ctx);
      return dataSource.transaction(async (em) => {
        const payment = await lockPayment(em, caller, req.paymentId);
        return toDispute(await openDispute(em, app, payment, "general"));
      });
    },

    async resolveDispute(req, ctx) {
      const caller = merchantOf(ctx);
      // UNSPECIFIED (0) is what an RPC client sends when it sets the field without choosing: no outcome.
      if (req.outcome === undefined || req.outcome === DisputeOutcome.UNSPECIFIED) throw missingField("outcome");
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
