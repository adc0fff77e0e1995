// The queue that runs /blitz job items. One interface, two implementations: BullMQ on Redis
// (bullmq-queue.ts), shared by every instance, which redelivers an item whose instance died; and
// this in-process one for the embedded defaults (one process: no one else could take the work).
// Items are identified by (job id, index); the item handler makes a redelivery harmless.

export interface ItemRef {
  jobId: string;
  idx: number;
}

/** What the handler wants done with an item it could not run yet (a rate limit): try again later. */
export type ItemVerdict = { retryAfterMs: number } | void;
export type ItemHandler = (item: ItemRef) => Promise<ItemVerdict>;

export interface JobQueue {
  /** Queues the items of a job, in index order. */
  add(jobId: string, indices: number[]): Promise<void>;
  /** Starts taking items (after the server listens). */
  start(handler: ItemHandler): void;
  /** Stops taking items and waits for those running. */
  close(): Promise<void>;
}

/** In-process FIFO with at most `concurrency` items running; a later retry waits on a timer. */
export class MemoryJobQueue implements JobQueue {
  private readonly queue: ItemRef[] = [];
  private running = 0;
  private handler: ItemHandler | null = null;
  private closed = false;
  private readonly timers = new Set<ReturnType<typeof setTimeout>>();
  private idle: Array<() => void> = [];

  constructor(private readonly concurrency: number, private readonly onError: (e: unknown, item: ItemRef) => void) {}

  async add(jobId: string, indices: number[]): Promise<void> {
    for (const idx of indices) this.queue.push({ jobId, idx });
    this.pump();
  }

  start(handler: ItemHandler): void {
    this.handler = handler;
    this.pump();
  }

  private pump(): void {
    while (this.handler && !this.closed && this.running < this.concurrency && this.queue.length > 0) {
      const item = this.queue.shift()!;
      this.running++;
      void this.handler(item)
        .then((v) => {
          if (v && !this.closed) {
            const t = setTimeout(() => {
              this.timers.delete(t);
              this.queue.push(item);
              this.pump();
            }, v.retryAfterMs);
            this.timers.add(t);
          }
        }, (e) => this.onError(e, item))
        .finally(() => {
          this.running--;
          if (this.running === 0) for (const f of this.idle.splice(0)) f();
          this.pump();
        });
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    if (this.running > 0) await new Promise<void>((r) => this.idle.push(r));
  }
}
