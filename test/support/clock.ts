import type { Clock } from "../../src/clock.js";

/** A clock a test moves by hand, for time-based behaviour without waiting (pass it to startService). */
export class TestClock implements Clock {
  private current: number;

  constructor(start: Date = new Date()) {
    this.current = start.getTime();
  }

  now(): Date {
    return new Date(this.current);
  }

  /** Moves time forward by `ms` milliseconds. */
  advance(ms: number): void {
    this.current += ms;
  }

  /** Moves time forward so the next object or change is strictly newer; returns the new time as the API writes it. */
  tick(ms = 1000): string {
    this.advance(ms);
    return this.now().toISOString();
  }
}
