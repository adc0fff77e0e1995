// Bounded concurrency for /blitz. Each batch runs at most `perRequest` prompts at once, and every
// batch on the instance shares one FIFO semaphore, so many batches in flight cannot open more
// upstream sockets (or hold more answers in memory) than the instance cap. Prompts over the cap
// wait their turn; they never fail for it. A waiting prompt whose batch is cancelled leaves the
// queue at once.

/** Prompts in flight across every /blitz request of one gateway instance. */
export const BLITZ_INSTANCE_CAP = 500;
/** Prompts in flight within one /blitz request (equal to the batch limit: a full batch runs at once). */
export const BLITZ_PER_REQUEST = 50;

export class AbortedError extends Error {
  override name = "AbortedError";
}

interface Waiter {
  grant: () => void;
  signal?: AbortSignal;
  onAbort?: () => void;
}

/** A counting semaphore with a FIFO queue and abortable waits. */
export class Semaphore {
  private used = 0;
  private readonly queue: Waiter[] = [];
  private peak = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError("Semaphore capacity must be a positive integer");
  }

  get inUse(): number { return this.used; }
  get waiting(): number { return this.queue.length; }
  /** Highest number of slots held at once since creation (for metrics and tests). */
  get highWater(): number { return this.peak; }

  /** Resolves with a release function once a slot is free; rejects with AbortedError when `signal` aborts first. */
  acquire(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(new AbortedError("cancelled before it started"));
    if (this.used < this.capacity && this.queue.length === 0) return Promise.resolve(this.take());
    return new Promise((resolve, reject) => {
      const w: Waiter = { grant: () => resolve(this.take()), signal };
      if (signal) {
        w.onAbort = () => {
          const i = this.queue.indexOf(w);
          if (i >= 0) this.queue.splice(i, 1);
          reject(new AbortedError("cancelled while queued"));
        };
        signal.addEventListener("abort", w.onAbort, { once: true });
      }
      this.queue.push(w);
    });
  }

  private take(): () => void {
    this.used++;
    if (this.used > this.peak) this.peak = this.used;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.used--;
      this.next();
    };
  }

  private next(): void {
    while (this.used < this.capacity && this.queue.length > 0) {
      const w = this.queue.shift()!;
      if (w.signal && w.onAbort) w.signal.removeEventListener("abort", w.onAbort);
      w.grant();
    }
  }
}

/**
 * Runs `task` over every item with at most `limit` running at once in this call and one slot of
 * `shared` held per running task. Results come back in item order. A task's own failure is its
 * result to report (tasks are expected not to throw); an AbortedError from a queued item is
 * passed to `onCancelled` so the caller can still give that item an entry.
 */
export async function runBounded<T, R>(
  items: readonly T[],
  opts: { limit: number; shared: Semaphore; signal?: AbortSignal },
  task: (item: T, index: number) => Promise<R>,
  onCancelled: (item: T, index: number) => R,
): Promise<R[]> {
  const local = new Semaphore(Math.max(1, Math.min(opts.limit, items.length || 1)));
  return Promise.all(items.map(async (item, index) => {
    let releaseLocal: (() => void) | undefined;
    let releaseShared: (() => void) | undefined;
    try {
      releaseLocal = await local.acquire(opts.signal);
      releaseShared = await opts.shared.acquire(opts.signal);
    } catch (e) {
      releaseLocal?.();
      if (e instanceof AbortedError) return onCancelled(item, index);
      throw e;
    }
    try {
      return await task(item, index);
    } finally {
      releaseShared();
      releaseLocal();
    }
  }));
}
