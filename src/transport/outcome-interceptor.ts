import type { Interceptor } from "@connectrpc/connect";
import { log } from "../log.js";
import { ErrorDetailSchema } from "../../gen/paymentservice/v1/error_pb.js";
import { toConnectError } from "./errors.js";
import { protocolKey } from "./protocol.js";

/**
 * Outermost interceptor: gives every failure its documented shape (internal errors become HE_00 with
 * the cause only in the log) and writes one log line per call with its outcome and duration.
 */
export const outcomeInterceptor: Interceptor = (next) => async (req) => {
  const started = performance.now();
  const procedure = `/${req.service.typeName}/${req.method.name}`;
  const protocol = req.contextValues.get(protocolKey);
  try {
    const res = await next(req);
    log.info("call", { procedure, protocol, ms: elapsed(started) });
    return res;
  } catch (reason) {
    const error = toConnectError(reason);
    const code = error.findDetails(ErrorDetailSchema)[0]?.code;
    const fields = { procedure, protocol, ms: elapsed(started), code };
    if (code === "HE_00") {
      const cause = error.cause ?? reason;
      log.error("call failed", { ...fields, cause: cause instanceof Error ? (cause.stack ?? cause.message) : String(cause) });
    } else {
      log.info("call rejected", fields);
    }
    throw error;
  }
};

function elapsed(started: number): number {
  return Math.round((performance.now() - started) * 10) / 10;
}

