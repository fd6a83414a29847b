/** A wait that ran out: the answer did not come within the time allowed. */
export class NoAnswerError extends Error {
  constructor(what: string, ms: number) {
    super(`${what} did not answer within ${ms} ms`);
  }
}

/**
 * The answer `pending` settles with, or a NoAnswerError once `ms` have passed without one. The timer
 * waits one more turn of the event loop before it gives up (setImmediate runs after the I/O that is
 * waiting has been read): when the loop itself was busy past `ms`, an answer that arrived in time is
 * still in the socket when the timer fires, and a busy instance must not take it for a slow server.
 * ioredis's own commandTimeout fires in that case (timers run before I/O is read), and then Redis
 * had counted a call that the instance counted again on its own (docs/rate-limits.md).
 */
export function answerWithin<T>(pending: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => setImmediate(() => reject(new NoAnswerError(what, ms))), ms);
    pending.then(
      (answer) => {
        clearTimeout(timer);
        resolve(answer);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
