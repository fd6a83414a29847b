import { createContextKey, type HandlerContext } from "@connectrpc/connect";

/**
 * Sends a streaming call's response headers before its first message. connect sends them with the
 * first message, so a stream with nothing to say yet looks to its client as if it had not begun; the
 * transport puts a sender under this key, and a handler calls it once the stream is live.
 */
export const sendStreamHeadKey = createContextKey<(header: Headers) => void>(() => {}, { description: "send a stream's headers now" });

/** Sends this streaming call's headers (those set on `ctx.responseHeader` so far) now, where the transport can. */
export function sendStreamHead(ctx: HandlerContext): void {
  ctx.values.get(sendStreamHeadKey)(ctx.responseHeader);
}
