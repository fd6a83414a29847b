/** A task handed to `Slots`: when it got its slot, and how it ended. */
export interface Slotted<T> {
  readonly started: Promise<void>;
  readonly ended: Promise<T>;
}

/**
 * Bounds how many jobs one instance runs at once, so a backlog cannot take every pooled connection
 * from the requests being served. Tasks start in the order they were handed in, so once the last of
 * a batch has started the whole batch has, and the runner may claim the next.
 */
export class Slots {
  private free: number;
  private readonly waiting: (() => void)[] = [];
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(size: number) {
    this.free = size;
  }

  /** Runs `task` once a slot is free, first come first served. */
  run<T>(task: () => Promise<T>): Slotted<T> {
    let started: Promise<void>;
    if (this.free > 0) {
      this.free--;
      started = Promise.resolve();
    } else {
      started = new Promise((resolve) => this.waiting.push(resolve));
    }
    const ended = started.then(task).finally(() => {
      this.inFlight.delete(ended);
      // The slot passes straight to the next task waiting, so none can overtake it.
      const next = this.waiting.shift();
      if (next === undefined) this.free++;
      else next();
    });
    this.inFlight.add(ended);
    return { started, ended };
  }

  /** Resolves once every task handed in so far, and any handed in meanwhile, has ended. */
  async drained(): Promise<void> {
    // A task's failure belongs to whoever handed it in; here only its end counts.
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }
}
