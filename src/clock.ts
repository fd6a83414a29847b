/**
 * The source of "now" for everything time-based, injectable so that tests and the sandbox test
 * clock can move time without waiting.
 */
export interface Clock {
  now(): Date;
}

/** Wall-clock time. */
export const systemClock: Clock = { now: () => new Date() };
