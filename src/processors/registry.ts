import { ApiError } from "../errors.js";
import type { PayoutProcessor, Processor } from "./processor.js";
import { SandboxProcessor } from "./sandbox.js";

/** Stateless, so one instance serves every sandbox request. */
const sandbox = new SandboxProcessor();

/**
 * The processor for a key's environment (decisions §3): sandbox keys always get the built-in
 * sandbox; production keys get a configured real processor, and none can be configured yet.
 */
export function processorFor(livemode: boolean): Processor {
  if (!livemode) return sandbox;
  // Where configured production processors will be chosen, once there are any to configure.
  throw new ApiError(
    "IR_16",
    "No payment processor is configured for production; use a sandbox key or configure a processor",
  );
}

/**
 * The payout processors for a key's environment, in routing order: the sandbox rails for sandbox
 * keys; production keys get the configured ones, and none can be configured yet.
 */
export function payoutProcessorsFor(sandboxRails: readonly PayoutProcessor[], livemode: boolean): readonly PayoutProcessor[] {
  if (!livemode) return sandboxRails;
  throw new ApiError(
    "IR_16",
    "No payout processor is configured for production; use a sandbox key or configure a processor",
  );
}
