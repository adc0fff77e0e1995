// Settlements off the hot path. Releasing an over-reservation (real ≤ reserved) and adding the
// spend of a key without a budget only make the counter more exact, never less safe, so they are
// summed per key and month and sent together a few milliseconds later: one KV command per key per
// window instead of one per request. A settlement that raises a budgeted key's counter (the real
// cost passed the estimate) goes out at once, so admission sees the overshoot immediately.
// A settlement the KV refuses (Redis down or frozen) is kept, summed with later ones, and retried
// every RETRY_MS until it goes through: spend is never dropped because Redis was away.
// The usage pipeline (usage-pipeline.ts) flushes it before every usage write and on shutdown.
import type { Base } from "../base.ts";
import { settle, settleMany, toNano, type BudgetedKey, type Reservation } from "./counters.ts";

const WINDOW_MS = 10;
const RETRY_MS = 1000;

export interface SettleBatcher {
  settle(key: BudgetedKey, res: Reservation, actualUsd: number): void;
  flush(): Promise<void>;
}

interface Pending {
  key: BudgetedKey;
  month: string;
  delta: number;
  actual: number;
}

export function createSettleBatcher(ctx: Pick<Base, "db" | "kv" | "log">): SettleBatcher {
  let pending = new Map<string, Pending>();
  let timer: ReturnType<typeof setTimeout> | null = null;
  const logError = (e: unknown) => ctx.log.error({ err: e instanceof Error ? e.message : String(e) }, "budget settle failed");

  function add(key: BudgetedKey, month: string, delta: number, actual: number, delayMs: number): void {
    const id = `${key.id}:${month}`;
    const p = pending.get(id);
    if (p) {
      p.delta += delta;
      p.actual += actual;
    } else {
      pending.set(id, { key, month, delta, actual });
    }
    timer ??= setTimeout(() => void flush(), delayMs);
  }

  /** Keeps a settlement the KV refused, to be retried. */
  const keep = (key: BudgetedKey, month: string, delta: number, actual: number) => (e: unknown) => {
    logError(e);
    add(key, month, delta, actual, RETRY_MS);
  };

  async function flush(): Promise<void> {
    if (timer) clearTimeout(timer);
    timer = null;
    const batch = pending;
    pending = new Map();
    await Promise.all([...batch.values()].map((p) => settleMany(ctx, p.key, p.month, p.delta, p.actual).catch(keep(p.key, p.month, p.delta, p.actual))));
  }

  return {
    settle(key, res, actualUsd) {
      const actual = toNano(actualUsd);
      const delta = actual - res.nano;
      if (delta === 0) return;
      if (delta > 0 && key.monthlyBudgetUsd !== null) {
        settle(ctx, key, res, actualUsd).catch(keep(key, res.month, delta, actual));
        return;
      }
      add(key, res.month, delta, actual, WINDOW_MS);
    },
    flush,
  };
}
