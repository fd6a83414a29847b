import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import { forbidden } from "../errors.js";

/** A merchant key that authenticated this call. */
export interface MerchantCaller {
  readonly kind: "merchant";
  readonly merchantId: string;
  /** Production (true) or sandbox (false): the partition every object of the call lives in. */
  readonly livemode: boolean;
  readonly publishable: boolean;
  readonly keyId: string;
}

/** Who made the call, as established by the authentication interceptor. */
export type Caller = { readonly kind: "admin" } | MerchantCaller;

/** Where the authentication interceptor leaves the caller for the handlers. */
export const callerKey = createContextKey<Caller | undefined>(undefined, { description: "authenticated caller" });

/** The authenticated caller; reaching a handler without one would be a wiring bug, not a client error. */
export function callerOf(ctx: HandlerContext): Caller {
  const caller = ctx.values.get(callerKey);
  if (caller === undefined) throw new Error(`no caller on ${ctx.method.name}: authentication did not run`);
  return caller;
}

/** The merchant caller of a merchant-only method. */
export function merchantOf(ctx: HandlerContext): MerchantCaller {
  const caller = callerOf(ctx);
  if (caller.kind !== "merchant") throw forbidden("This operation needs a merchant API key");
  return caller;
}
