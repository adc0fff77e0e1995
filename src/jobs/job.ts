// A background job: runs `tick` every `intervalMs`, never overlapping itself, logs failures,
// and stops cleanly (the shutdown waits for a tick in progress).
import type { Base } from "../base.ts";
import { fleetNamespace } from "../store/kv/index.ts";

export interface Job {
  readonly name: string;
  start(): void;
  stop(): Promise<void>;
  /** Runs one tick now, or one more after the tick under way (nudges, tests and shutdown drains). */
  runOnce(): Promise<void>;
}

export function intervalJob(ctx: Base, name: string, intervalMs: number, tick: () => Promise<void>): Job {
  let timer: ReturnType<typeof setInterval> | null = null;
  let running: Promise<void> | null = null;
  let again: Promise<void> | null = null;
  const begin = () => {
    running = tick()
      .catch((e) => ctx.log.error({ job: name, err: e instanceof Error ? e.message : String(e) }, "job tick failed"))
      .finally(() => { running = null; });
    return running;
  };
  // A tick already under way may have looked before what the caller wants seen (a row it just
  // wrote): one more tick follows it, shared by every caller in the meantime.
  const runOnce = (): Promise<void> => {
    if (!running) return begin();
    return (again ??= running.then(() => {
      again = null;
      return running ?? begin();
    }));
  };
  return {
    name,
    runOnce,
    start() {
      if (timer) return;
      // The timer's own ticks are skipped while one runs: a slow tick is not followed by a backlog.
      timer = setInterval(() => { if (!running) void begin(); }, intervalMs);
      timer.unref?.();
    },
    async stop() {
      if (timer) clearInterval(timer);
      timer = null;
      if (again) await again;
      if (running) await running;
    },
  };
}

/**
 * True when this instance is the first of its fleet to claim the current interval of `everyMs`
 * for `name` (one INCR in the shared store, under the fleet's namespace, that outlives the
 * interval): a job whose work is the fleet's rather than the instance's (checking every budgeted
 * key, probing every bridge) then runs once per interval however many instances tick. With the
 * store away, every instance claims it: the work runs as it did before claims.
 */
async function claimInterval(ctx: Pick<Base, "config" | "kv">, name: string, everyMs: number): Promise<boolean> {
  const interval = Math.floor(Date.now() / everyMs);
  const n = await ctx.kv.incrWindow(`${fleetNamespace(ctx.config)}:${name}:${interval}`, Math.ceil((2 * everyMs) / 1000)).catch(() => 1);
  return n === 1;
}

/**
 * A job whose work is the fleet's rather than the instance's: every instance ticks, and only the
 * first to claim an interval (claimInterval) runs `tick` in it.
 */
export function fleetIntervalJob(ctx: Base, name: string, intervalMs: number, tick: () => Promise<void>): Job {
  return intervalJob(ctx, name, intervalMs, async () => {
    if (await claimInterval(ctx, name, intervalMs)) await tick();
  });
}
