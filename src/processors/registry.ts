import { noProcessorConfigured } from "../errors.js";
import type { PayoutProcessor, Processor } from "./processor.js";

/**
 * The processors this instance can use, given to whatever calls one (decisions §3): sandbox keys
 * always get the built-in sandbox; production keys get configured real processors, and none can be
 * configured yet. A step after the first (capture, void, refund, 3DS) goes to the processor the
 * payment recorded, never to whichever processor its environment would get today.
 */
export class ProcessorRegistry {
  private readonly byName: ReadonlyMap<string, Processor>;

  constructor(
    private readonly sandbox: Processor,
    /** The sandbox payout rails, in routing order. */
    readonly sandboxPayoutRails: readonly PayoutProcessor[],
  ) {
    this.byName = new Map([[sandbox.name, sandbox]]);
  }

  /** The processor a new payment of the environment goes to. */
  forNewPayment(livemode: boolean): Processor {
    if (!livemode) return this.sandbox;
    throw noProcessorConfigured("payment");
  }

  /** The processor of that name: the one a payment recorded, to which every later step of it goes. */
  named(name: string): Processor {
    const processor = this.byName.get(name);
    if (processor === undefined) throw new Error(`no processor is named ${name}`);
    return processor;
  }

  /** The payout processors of the environment, in routing order. */
  payoutRailsFor(livemode: boolean): readonly PayoutProcessor[] {
    if (!livemode) return this.sandboxPayoutRails;
    throw noProcessorConfigured("payout");
  }
}
