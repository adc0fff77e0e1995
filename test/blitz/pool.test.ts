// The bounded pool behind /blitz: per-request limit, an instance-wide cap shared by every batch,
// FIFO queueing over the cap (no failures), and cancellation of queued work.
import { describe, expect, test } from "bun:test";
import { AbortedError, runBounded, Semaphore } from "../../src/blitz/pool.ts";

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe("blitz pool", () => {
  test("the instance cap bounds prompts in flight across batches; prompts over the cap queue and all succeed", async () => {
    const shared = new Semaphore(7);
    let running = 0;
    let peak = 0;
    const task = async (x: number) => {
      running++;
      peak = Math.max(peak, running);
      await sleep(5);
      running--;
      return x * 2;
    };
    const batches = await Promise.all(
      [0, 1, 2, 3].map((b) => runBounded(Array.from({ length: 10 }, (_, i) => b * 10 + i), { limit: 50, shared }, task, () => -1)),
    );
    expect(peak).toBe(7);
    expect(shared.highWater).toBe(7);
    expect(batches.flat()).toEqual(Array.from({ length: 40 }, (_, i) => i * 2));
    expect(shared.inUse).toBe(0);
  });

  test("the per-request limit bounds one batch even when the instance cap is larger", async () => {
    const shared = new Semaphore(500);
    let running = 0;
    let peak = 0;
    await runBounded(Array.from({ length: 20 }, (_, i) => i), { limit: 4, shared }, async () => {
      running++;
      peak = Math.max(peak, running);
      await sleep(3);
      running--;
    }, () => undefined);
    expect(peak).toBe(4);
  });

  test("results keep item order whatever order tasks finish in", async () => {
    const out = await runBounded([30, 1, 15, 0], { limit: 4, shared: new Semaphore(4) }, async (ms, i) => {
      await sleep(ms);
      return i;
    }, () => -1);
    expect(out).toEqual([0, 1, 2, 3]);
  });

  test("cancelling a batch removes its queued prompts from the shared queue", async () => {
    const shared = new Semaphore(2);
    const ctrl = new AbortController();
    let started = 0;
    const run = runBounded([0, 1, 2, 3, 4], { limit: 50, shared, signal: ctrl.signal }, async (i) => {
      started++;
      await sleep(20);
      return `done ${i}`;
    }, (_x, i) => `cancelled ${i}`);
    await sleep(5);
    expect(shared.waiting).toBe(3);
    ctrl.abort();
    expect(shared.waiting).toBe(0);
    const out = await run;
    expect(started).toBe(2);
    expect(out).toEqual(["done 0", "done 1", "cancelled 2", "cancelled 3", "cancelled 4"]);
    expect(shared.inUse).toBe(0);
  });

  test("an already-aborted signal never takes a slot", async () => {
    const s = new Semaphore(1);
    const ctrl = new AbortController();
    ctrl.abort();
    await expect(s.acquire(ctrl.signal)).rejects.toBeInstanceOf(AbortedError);
    expect(s.inUse).toBe(0);
  });

  test("releasing twice frees one slot only", async () => {
    const s = new Semaphore(1);
    const release = await s.acquire();
    release();
    release();
    expect(s.inUse).toBe(0);
    const again = await s.acquire();
    expect(s.inUse).toBe(1);
    again();
  });
});
