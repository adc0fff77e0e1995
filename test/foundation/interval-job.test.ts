// Background jobs (src/jobs/job.ts): a tick never overlaps another; a runOnce that arrives while a
// tick runs gets one more tick after it (a nudge for a row just written is never lost to a tick
// that looked before the row existed), shared by every caller in the meantime; the timer's own
// ticks are skipped while one runs.
import { describe, expect, test } from "bun:test";
import { intervalJob } from "../../src/jobs/job.ts";
import type { Base } from "../../src/base.ts";

const quiet = { log: { error() {}, warn() {}, info() {} } } as unknown as Base;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe("interval jobs", () => {
  test("runOnce during a tick runs exactly one more tick after it, shared by every caller", async () => {
    let ticks = 0;
    let concurrent = 0;
    let most = 0;
    let release!: () => void;
    let gate = new Promise<void>((r) => { release = r; });
    const job = intervalJob(quiet, "t", 60_000, async () => {
      ticks++;
      concurrent++;
      most = Math.max(most, concurrent);
      await gate;
      concurrent--;
    });
    const first = job.runOnce();
    const a = job.runOnce();
    const b = job.runOnce();
    expect(a).toBe(b);
    expect(ticks).toBe(1);
    const firstGate = release;
    gate = new Promise<void>((r) => { release = r; });
    firstGate();
    await first;
    await sleep(0);
    expect(ticks).toBe(2);
    release();
    await a;
    expect(ticks).toBe(2);
    expect(most).toBe(1);
    await job.runOnce();
    expect(ticks).toBe(3);
  });

  test("the timer skips its ticks while one runs: a slow tick leaves no backlog", async () => {
    let ticks = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    const job = intervalJob(quiet, "t", 10, async () => {
      ticks++;
      await gate;
    });
    job.start();
    await sleep(150);
    expect(ticks).toBe(1);
    release();
    await sleep(5);
    await job.stop();
    expect(ticks).toBeLessThanOrEqual(2);
  });

  test("stop waits for a tick under way and the one queued after it", async () => {
    const done: number[] = [];
    let n = 0;
    const job = intervalJob(quiet, "t", 60_000, async () => {
      const i = ++n;
      await sleep(30);
      done.push(i);
    });
    void job.runOnce();
    void job.runOnce();
    await job.stop();
    expect(done).toEqual([1, 2]);
  });
});
