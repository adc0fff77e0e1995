// A background job: runs `tick` every `intervalMs`, never overlapping itself, logs failures,
// and stops cleanly (the shutdown waits for a tick in progress).
import type { Base } from "../base.ts";

export interface Job {
  readonly name: string;
  start(): void;
  stop(): Promise<void>;
  /** Runs one tick now (tests and shutdown drains use it). */
  runOnce(): Promise<void>;
}

export function intervalJob(ctx: Base, name: string, intervalMs: number, tick: () => Promise<void>): Job {
  let timer: ReturnType<typeof setInterval> | null = null;
  let running: Promise<void> | null = null;
  const runOnce = async () => {
    if (running) return running;
    running = tick()
      .catch((e) => ctx.log.error({ job: name, err: e instanceof Error ? e.message : String(e) }, "job tick failed"))
      .finally(() => { running = null; });
    return running;
  };
  return {
    name,
    runOnce,
    start() {
      if (timer) return;
      timer = setInterval(() => void runOnce(), intervalMs);
      timer.unref?.();
    },
    async stop() {
      if (timer) clearInterval(timer);
      timer = null;
      if (running) await running;
    },
  };
}
