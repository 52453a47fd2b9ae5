// A counting semaphore: at most `permits` holders at once, the others wait in arrival order (a bounded
// queue: a waiter beyond `waiting_max` is refused at once rather than queued without limit).
export class Semaphore {
  private held = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(
    private readonly permits: number,
    private readonly waiting_max: number,
  ) {
    if (!Number.isInteger(permits) || permits < 1) throw new RangeError('a semaphore needs at least one permit');
  }

  /** Runs `work` holding a permit. */
  async with<T>(work: () => Promise<T>): Promise<T> {
    if (this.held >= this.permits) {
      if (this.waiting.length >= this.waiting_max)
        throw new Error(`more than ${this.waiting_max} waiting for one of ${this.permits} permits`);
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.held++;
    }
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next)
        next(); // the permit passes to the next waiter
      else this.held--;
    }
  }
}
