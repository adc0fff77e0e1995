// Budget leases (CONTRACT §7): a hot budgeted key admitted without a Redis round trip per request.
// An instance that sees a key hot (relay/slices.ts: a second admission within SLICE_MS) reserves,
// with its next admission, a slice of the key's remaining budget: one reservation in the key's
// month counter like any other, with its own in-flight entry. It then admits the following
// requests of the key locally while their worst case fits in what the lease has left. Each has an
// in-flight entry of its own (naming the lease and its worst case, holding nothing in the counter),
// sent with the turn's entries before its upstream call, without waiting for Redis; settlements and
// usage records go to Redis in batches (ledger/writes.ts), each moving its cost from the lease's
// entry to its record. The lease ends after LEASE_MS, after LEASE_IDLE_MS without
// a request (an open lease's unused part counts as spent in the month's spend until it is back), when a request does not fit, when the key's budget changes, or when Redis lost its
// state; once its last request has settled, what it did not use goes back to the counter.
//
// The ceiling: every request is still admitted against reserved money (the lease's), so spend
// passes the budget only by the prompt estimate's error, as without leases. Slices shrink with
// what remains (at most a quarter of it) and one that would not hold LEASE_MIN_REQUESTS requests
// like the one asking is not taken, so near the end every request is admitted in Redis again.
//
// A crash is settled like the instance's other in-flight work (ledger/reconcile.ts): each request
// whose settlement had not reached Redis gets one `interrupted` record at its worst case, moved out
// of the lease's entry, and what the lease still holds beyond them goes back to the budget. A crash
// never charges more than the worst case of what was in flight; counter = Σ records.
import type { Base } from "../base.ts";
import { monthKey } from "../lib/time.ts";
import { HotKeys, sliceSize } from "../relay/slices.ts";
import { toNano, type BudgetedKey } from "./counters.ts";
import type { Ledger } from "./ledger/index.ts";

/** The longest a lease admits requests. */
export const LEASE_MS = 5000;
/** A lease with no request this long is given back. */
export const LEASE_IDLE_MS = 250;
/** A slice smaller than this many requests like the one asking is not worth a lease. */
export const LEASE_MIN_REQUESTS = 4;

interface Lease {
  /** Its in-flight entry's id (a money-call uid). */
  id: string;
  key: BudgetedKey;
  month: string;
  /** The budget (nano) it was taken under: a changed budget ends it. */
  budget: number;
  /** Nano-dollars it may still admit: granted less admitted worst cases, plus what settlements gave back. */
  free: number;
  /** Requests admitted from it that have not settled. */
  outstanding: number;
  until: number;
  lastAt: number;
  ended: boolean;
}

/** A request admitted from a lease, until it settles. */
export interface LeaseHold {
  lease: Lease;
  /** What the request reserved from the lease (its worst case). */
  nano: number;
}

export class BudgetLeases {
  private leases = new Map<string, Lease>();
  /** Leases being taken (their admission is on its way to Redis), by key. */
  private taking = new Map<string, Promise<unknown>>();
  private hot = new HotKeys<number>();
  private timer: ReturnType<typeof setInterval> | null = null;

  constructor(private ledger: Ledger) {
    ledger.onLost = () => this.endAll();
  }

  /** A Redis admission on a budgeted key: what the counter left (for the next lease's size). */
  seen(key: BudgetedKey, counterNano: number): void {
    if (key.monthlyBudgetUsd === null) return;
    this.hot.admitted(key.id, toNano(key.monthlyBudgetUsd) - counterNano);
  }

  /** Admits a request from this instance's lease of the key when its worst case fits; else null. */
  admit(key: BudgetedKey, nano: number): LeaseHold | null {
    const l = this.leases.get(key.id);
    if (!l) return null;
    const now = Date.now();
    if (now >= l.until || l.budget !== toNano(key.monthlyBudgetUsd ?? -1) || l.month !== monthKey() || l.free < nano) {
      this.end(l);
      return null;
    }
    l.free -= nano;
    l.outstanding++;
    l.lastAt = now;
    return { lease: l, nano };
  }

  /** A lease of the key being taken, to wait for instead of taking another; null when none. */
  pending(keyId: string): Promise<unknown> | null {
    return this.taking.get(keyId) ?? null;
  }

  /**
   * The slice to reserve with this admission (nano), or 0: the key is not hot, or the slice would
   * not hold LEASE_MIN_REQUESTS requests of `nano`.
   */
  size(key: BudgetedKey, nano: number): number {
    if (key.monthlyBudgetUsd === null || this.taking.has(key.id)) return 0;
    const left = this.hot.hot(key.id);
    if (left === null) return 0;
    const slice = sliceSize(toNano(key.monthlyBudgetUsd), left, this.ledger.liveInstances);
    return slice >= LEASE_MIN_REQUESTS * Math.max(1, nano) ? slice : 0;
  }

  /** Marks a lease of the key as being taken until `p` settles. */
  takes(keyId: string, p: Promise<unknown>): void {
    const done = () => { if (this.taking.get(keyId) === guarded) this.taking.delete(keyId); };
    const guarded = p.then(done, done);
    this.taking.set(keyId, guarded);
  }

  /** A lease Redis granted (`granted` nano, entry `id`); the request that took it is its first. */
  opened(key: BudgetedKey, id: string, month: string, granted: number, nano: number): LeaseHold {
    const old = this.leases.get(key.id);
    if (old) this.end(old);
    const now = Date.now();
    const l: Lease = { id, key, month, budget: toNano(key.monthlyBudgetUsd ?? -1), free: granted - nano, outstanding: 1, until: now + LEASE_MS, lastAt: now, ended: false };
    this.leases.set(key.id, l);
    this.startTimer();
    return { lease: l, nano };
  }

  /** A lease-admitted request's end: its real cost leaves the lease, in the ledger's next batch. */
  settle(h: LeaseHold, uid: string, actualNano: number): void {
    const l = h.lease;
    l.free += h.nano - actualNano;
    l.outstanding--;
    this.ledger.settleLeased(l.key, l.month, l.id, uid, h.nano, actualNano);
    if (l.ended && l.outstanding === 0) this.ledger.closeLease(l.key, l.month, l.id);
  }

  /** Stops a lease admitting; it is given back once its last request settled. */
  private end(l: Lease): void {
    if (l.ended) return;
    l.ended = true;
    if (this.leases.get(l.key.id) === l) this.leases.delete(l.key.id);
    if (l.outstanding === 0) this.ledger.closeLease(l.key, l.month, l.id);
  }

  /** Redis lost its state, or the instance stops: no lease admits any more. */
  endAll(): void {
    for (const l of [...this.leases.values()]) this.end(l);
  }

  private startTimer(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.expire(), LEASE_IDLE_MS / 2);
    this.timer.unref?.();
  }

  /** Ends leases past their time or idle for LEASE_IDLE_MS. */
  private expire(): void {
    const now = Date.now();
    for (const l of [...this.leases.values()]) if (now >= l.until || now - l.lastAt >= LEASE_IDLE_MS) this.end(l);
    this.hot.prune(now);
    if (!this.leases.size && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  stop(): void {
    this.endAll();
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}

/** Budget leases in Redis mode unless BUDGET_LEASES=false (`ctx.services.leases`; null otherwise). */
export function startBudgetLeases(ctx: Base, ledger: Ledger | null): BudgetLeases | null {
  if (!ledger || !ctx.config.BUDGET_LEASES) return null;
  const leases = new BudgetLeases(ledger);
  // Registered after the ledger: shutdowns run in reverse, so leases end before its last flush.
  ctx.onShutdown(() => leases.stop());
  return leases;
}
