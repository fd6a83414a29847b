import type { ConnectError, Interceptor } from "@connectrpc/connect";
import { documentedCodeOf, toConnectError } from "./errors.js";
import { requestRecordKey } from "./request-record.js";

/** A stream's messages, a failure while they are produced thrown in its documented shape. */
async function* documentedFailures<T>(messages: AsyncIterable<T>, documented: (reason: unknown) => ConnectError): AsyncIterable<T> {
  try {
    yield* messages;
  } catch (reason) {
    throw documented(reason);
  }
}

/**
 * Outermost interceptor: gives every failure its documented shape (an internal error becomes HE_00
 * carrying the request id, its cause kept for the log only) and notes the outcome on the request's
 * record, which the port logs once when the request ends. A stream's handler runs as its messages
 * are read, after this interceptor has returned, so its failures are caught where they are read.
 */
export const outcomeInterceptor: Interceptor = (next) => async (req) => {
  const record = req.contextValues.get(requestRecordKey);
  const documented = (reason: unknown): ConnectError => {
    const error = toConnectError(reason, record?.id);
    record?.answered(documentedCodeOf(error), error.cause ?? reason);
    return error;
  };
  try {
    const res = await next(req);
    return res.stream ? { ...res, message: documentedFailures(res.message, documented) } : res;
  } catch (reason) {
    throw documented(reason);
  }
};
