import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { deadlineExceeded } from "../errors.js";

/** Whether a call's signal was aborted because the client's deadline passed (connect's deadline signal). */
function deadlinePassed(signal: AbortSignal): boolean {
  return signal.aborted && signal.reason instanceof ConnectError && signal.reason.code === Code.DeadlineExceeded;
}

/**
 * Honours the deadline a client sets (`grpc-timeout`, `connect-timeout-ms`) as gRPC and Connect
 * define it: a call whose deadline has passed before it starts is refused with TO_01
 * (`deadline_exceeded`) without running; one still running when it passes is answered TO_01 then.
 * The work itself runs to its end, as a REST call does when its client goes away: an operation on
 * money is never cut off halfway, and a retry with the same idempotency key gets its outcome.
 */
export const deadlineInterceptor: Interceptor = (next) => (req) => {
  const { signal } = req;
  // Most calls set no deadline (REST cannot): they need no watching.
  if (req.stream || (!req.header.has("grpc-timeout") && !req.header.has("connect-timeout-ms"))) return next(req);
  if (deadlinePassed(signal)) return Promise.reject(deadlineExceeded());
  const call = next(req);
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      if (deadlinePassed(signal)) reject(deadlineExceeded());
    };
    signal.addEventListener("abort", onAbort, { once: true });
    call.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
};
