import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { DisputeOutcome, type SandboxService } from "../../gen/paymentservice/v1/sandbox_pb.js";
import { merchantOf } from "../auth/caller.js";
import type { Clock } from "../clock.js";
import { lockUnclaimed, waitingForClaims } from "../objects/claims.js";
import type { UnitOfWork } from "../db/unit-of-work.js";
import { openDispute } from "../disputes/operations/open.js";
import { resolveOperation } from "../disputes/operations/resolve.js";
import { runLocked } from "../objects/locked-operation.js";
import { disputeResource } from "../disputes/store.js";
import { toDispute } from "../disputes/view.js";
import { invalidField, missingField, preconditionFailed } from "../errors.js";
import type { JobWaker } from "../jobs/runner.js";
import { paymentResource } from "../payments/store.js";
import { type SandboxTestClock, testClockEnd } from "../test-clock.js";

/** What the sandbox controls need: time, the shared test clock when it is on, the job runner to wake, and how effects commit. */
export interface SandboxDependencies {
  readonly clock: Clock;
  readonly testClock: SandboxTestClock | undefined;
  readonly jobs: JobWaker;
  readonly units: UnitOfWork;
}

/** Longest single step of the test clock: ten years. */
const maxAdvanceSeconds = 10 * 365 * 86_400;

/**
 * Sandbox controls for tests (decisions §4, §9): move the shared test clock, open a dispute on any
 * succeeded sandbox payment, and settle a challenged one as the network would. The dispute controls
 * stand in for the card network, so their access rule admits sandbox secret keys only.
 */
export function sandboxService(deps: SandboxDependencies): ServiceImpl<typeof SandboxService> {
  const { clock, units } = deps;

  return {
    async advanceClock(req) {
      if (deps.testClock === undefined) {
        throw preconditionFailed("The test clock is off: start the service with SANDBOX_TEST_CLOCK=true to move time");
      }
      if (req.seconds === undefined) throw missingField("seconds");
      if (req.seconds < 1n || req.seconds > BigInt(maxAdvanceSeconds)) {
        throw invalidField("seconds", `expected 1 to ${maxAdvanceSeconds}`);
      }
      const now = await deps.testClock.advance(Number(req.seconds));
      if (now === undefined) {
        throw invalidField("seconds", `would move the test clock past ${testClockEnd.toISOString()}, its latest time`);
      }
      deps.jobs.wake();
      return { now: timestampFromDate(now) };
    },

    async openDispute(req, ctx) {
      const caller = merchantOf(ctx);
      const open = () =>
        units.commit(ctx, async (em) => {
          const payment = await lockUnclaimed(em, clock, paymentResource, caller, req.paymentId);
          return toDispute(await openDispute(em, clock, payment, "general"));
        });
      return waitingForClaims(open, ctx.signal);
    },

    async resolveDispute(req, ctx) {
      const caller = merchantOf(ctx);
      // UNSPECIFIED (0) is what an RPC client sends when it sets the field without choosing: no outcome.
      if (req.outcome === undefined || req.outcome === DisputeOutcome.UNSPECIFIED) throw missingField("outcome");
      const resolve = resolveOperation(clock, caller, req.disputeId, req.outcome === DisputeOutcome.WON ? "won" : "lost");
      return units.commit(ctx, async (em) => toDispute(await runLocked(em, clock, disputeResource, resolve)));
    },
  };
}
