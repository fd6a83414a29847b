import type { Interceptor } from "@connectrpc/connect";
import { documentedCodeOf, toConnectError } from "./errors.js";
import { requestRecordKey } from "./request-record.js";

/**
 * Outermost interceptor: gives every failure its documented shape (an internal error becomes HE_00
 * carrying the request id, its cause kept for the log only) and notes the outcome on the request's
 * record, which the port logs once when the request ends.
 */
export const outcomeInterceptor: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (reason) {
    const record = req.contextValues.get(requestRecordKey);
    const error = toConnectError(reason, record?.id);
    record?.answered(documentedCodeOf(error), error.cause ?? reason);
    throw error;
  }
};
