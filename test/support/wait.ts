/**
 * Polls `probe` until `done` accepts its value, at most `tries` times, and returns that value. Each
 * try is a real request, so the loop waits on the service rather than on a timer; a probe that never
 * satisfies `done` fails the test with the last value it saw.
 */
export async function waitUntil<T>(probe: () => Promise<T>, done: (value: T) => boolean, tries = 200): Promise<T> {
  let last: T | undefined;
  for (let attempt = 1; attempt <= tries; attempt++) {
    last = await probe();
    if (done(last)) return last;
  }
  throw new Error(
    `still not done after ${tries} tries; last value: ${JSON.stringify(last, (_, v) => (typeof v === "bigint" ? String(v) : v))}`,
  );
}

/** Waits `ms` of real time: for a fault to be felt, or between a client's calls. */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Resolves once `check` holds, looking every `everyMs`; fails after `withinMs` with `what`. For
 * conditions measured against real time (a database back after a restart), unlike waitUntil.
 */
export async function until(what: string, check: () => Promise<boolean> | boolean, withinMs: number, everyMs = 25): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${withinMs} ms`);
    await sleep(everyMs);
  }
}
