// Redis losing its state (CONTRACT §7). `gw:epoch` vanishing or changing means Redis restarted
// empty; a changed master identity (redis-identity.ts) means a failover or restart that may have
// lost the last acknowledged writes. Either way admissions wait (`gate`) while this instance
// re-asserts its own in-flight entries onto the rebuilt counters and writes the streamed records
// Redis lost before any drain committed them (from its copies: unacked.ts). After an empty restart
// budgeted admissions then wait, on every instance, until the recovery barrier has passed:
// RECOVERY_BARRIER_MS after the new epoch was created, on Redis's clock. Every live instance checks
// the epoch at least once per EPOCH_CHECK_MS, so by then each has re-asserted, and no instance
// admitted on a counter missing another instance's requests in flight (CONTRACT §7).
import { inArray } from "drizzle-orm";
import type { Base } from "../../base.ts";
import { randomToken } from "../../lib/crypto.ts";
import { usageRecords } from "../../store/db/schema/index.ts";
import type { Cmds } from "../../store/kv/redis.ts";
import type { UsageQueue, UsageRow } from "../../relay/usage-queue.ts";
import { addingKey, counterKey, inflightKey, ttl } from "../counters.ts";
import { masterIdentity } from "../redis-identity.ts";
import type { StreamDrain } from "./drain.ts";
import { callOfRecord, drainedUpTo, settlesOf } from "./unacked.ts";
import { GROUP, type LedgerKeys, type SentSettles } from "./types.ts";
import { packIds, reassertArgs } from "./wire.ts";
import type { LedgerWrites } from "./writes.ts";

/** How often each instance checks the epoch (the ledger's heartbeat). */
export const EPOCH_CHECK_MS = 1000;
/** Budgeted admissions wait this long after a new epoch was created (Redis's clock): two epoch checks. */
export const RECOVERY_BARRIER_MS = 2 * EPOCH_CHECK_MS;
/** How often a waiting instance looks at Redis's clock (and sees another restart during the wait). */
const BARRIER_LOOK_MS = 100;

/**
 * Milliseconds of the recovery barrier still to run at Redis time `now` for `epoch`
 * ("<token>@<created ms>"; an epoch written without its creation time has no barrier).
 */
export function barrierLeft(epoch: string, now: number): number {
  const at = epoch.lastIndexOf("@");
  const created = at < 0 ? NaN : Number(epoch.slice(at + 1));
  return Number.isFinite(created) ? created + RECOVERY_BARRIER_MS - now : 0;
}

export class Epoch {
  private epoch: string | null = null;
  /** The masters' identity when last seen (redis-identity.ts). */
  private master: string | null = null;
  /** Set while re-asserting after a Redis restart: admissions wait for it. */
  gate: Promise<void> | null = null;
  /** Copies taken when Redis lost the stream, until they are written (retried every heartbeat). */
  private lost: { records: UsageRow[]; settles: SentSettles[] } | null = null;

  constructor(private ctx: Base, private r: Cmds, private queue: UsageQueue, private k: LedgerKeys, private writes: LedgerWrites, private stream: StreamDrain) {}

  /** Reads (or sets) the epoch and the master's identity at start. */
  async start(): Promise<void> {
    this.master = await masterIdentity(this.r);
    await this.stream.ensureGroup();
    const [epoch, now] = await this.r.gwEpoch(this.k.epoch, randomToken(8));
    this.epoch = epoch;
    // An epoch this instance (or another just now) created may follow an empty restart whose
    // other instances have not re-asserted yet: the barrier holds for a starting instance too.
    if (barrierLeft(epoch, now) > 0) this.hold(async () => { if (!(await this.barrier())) await this.recover(); }).catch(() => {});
  }

  /**
   * A failover (Sentinel promoted a replica, a Cluster node failed over) or a restart keeps the
   * epoch (it was replicated, or persisted) but may have lost the last writes the old master
   * acknowledged: reservations, in-flight entries, settlements, usage-stream entries. Admissions
   * wait while this instance re-asserts, the same repair as after an empty restart.
   */
  checkMaster(): Promise<void> {
    if (this.gate) return this.gate;
    return this.hold(async () => {
      const now = await masterIdentity(this.r);
      if (this.master === null || now === this.master) {
        this.master = now;
        return;
      }
      this.ctx.log.warn({}, "Redis master changed (failover or restart): re-asserting this instance's requests in flight");
      await this.recover();
      this.master = now; // only once repaired: a recovery cut short by another outage runs again
    });
  }

  /** Checks the epoch; when Redis lost its state, admissions wait while this instance re-asserts. */
  async checkEpoch(): Promise<void> {
    if (this.gate) return this.gate;
    const cur = await this.r.get(this.k.epoch);
    if (cur !== null && cur === this.epoch) return;
    return this.hold(() => this.recover());
  }

  /** Holds admissions (the gate, set before this turn ends) while `work` runs. */
  private hold(work: () => Promise<void>): Promise<void> {
    const gate: Promise<void> = work().finally(() => { if (this.gate === gate) this.gate = null; });
    this.gate = gate;
    return gate;
  }

  /**
   * Waits, by Redis's clock, until the current epoch's recovery barrier has passed; false when the
   * epoch changed meanwhile (Redis lost its state again: this instance must re-assert again).
   */
  private async barrier(): Promise<boolean> {
    for (;;) {
      const [epoch, now] = await this.r.gwEpoch(this.k.epoch, randomToken(8));
      if (epoch !== this.epoch) return false;
      const left = barrierLeft(epoch, now);
      if (left <= 0) return true;
      // The timer only paces the next look; Redis's clock decides when the barrier has passed.
      await new Promise((r) => setTimeout(r, Math.min(left, BARRIER_LOOK_MS)));
    }
  }

  /** Told when Redis lost its state (budget leases stop admitting: leases.ts). */
  onLost: () => void = () => {};

  private async recover(): Promise<void> {
    for (;;) {
      // Taken before anything awaits: no prune may judge these copies by the new stream's watermark.
      this.keepLost(this.writes.unacked.take());
      this.onLost();
      this.ctx.log.warn({}, "Redis lost its state: re-asserting this instance's requests in flight");
      await this.reassert();
      if (await this.barrier()) return;
    }
  }

  private async reassert(): Promise<void> {
    [this.epoch] = await this.r.gwEpoch(this.k.epoch, randomToken(8));
    this.writes.forgetKeys();
    await this.stream.ensureGroup();
    await this.r.hset(this.k.instances, this.ctx.instanceId, Date.now());
    const byKey = this.writes.reassertion();
    // No counter is rebuilt here: one rebuilt now, before the other instances have re-asserted,
    // would count the records of their settlements in flight, which then add their cost again.
    // REASSERT puts this instance's entries and settlements not yet applied in the month's adding
    // set instead (the counter missing), and the first rebuild after the recovery barrier leaves
    // their records out and adds the entries' reservations (store/kv/ledger-scripts.ts).
    // What this instance holds for Postgres is written before the barrier passes, so that rebuild
    // finds it (see LedgerWrites.addToRebuilt()). Postgres unreachable: the heartbeat tries again.
    if (byKey.length) await this.queue.flushQueued();
    this.writes.resetAdding();
    for (const { key, month, entries, pending } of byKey) {
      this.writes.registerKey(key.id);
      const into = await this.r.gwReassert(counterKey(key.id, month), inflightKey(key.id), addingKey(key.id, month), ttl(), packIds(pending), ...reassertArgs(entries));
      if (into === 1) this.writes.markAdding([...entries.map((e) => e.id), ...pending]);
    }
    // Postgres unreachable: the copies stay in `lost` and the heartbeat tries again.
    await this.rewriteLost().catch((e) => this.ctx.log.warn({ err: e instanceof Error ? e.message : String(e) }, "rewriting lost usage records failed; retrying"));
  }

  /** True while streamed records Redis lost wait to be written. */
  get hasLost(): boolean {
    return this.lost !== null;
  }

  /**
   * Writes the streamed records Redis lost before any drain committed them: those no Postgres row
   * holds yet are settled again first (their settlement went to the counter Redis lost; the new
   * counter, rebuilt from Postgres, cannot hold them yet), then written.
   */
  async rewriteLost(): Promise<void> {
    // Claimed before the first await: a concurrent call, or copies a later restart adds, never
    // meet this batch (it would be settled twice, or they dropped with it).
    const lost = this.lost;
    if (!lost) return;
    this.lost = null;
    const have = new Set<string>();
    const keys = lost.records.map((r) => r.recordKey).filter((k): k is string => !!k);
    try {
      for (let i = 0; i < keys.length; i += 1000) {
        const rows = await this.ctx.db.select({ k: usageRecords.recordKey }).from(usageRecords).where(inArray(usageRecords.recordKey, keys.slice(i, i + 1000)));
        for (const r of rows) if (r.k) have.add(r.k);
      }
    } catch (e) {
      this.keepLost(lost); // Postgres unreachable: the next heartbeat tries again
      throw e;
    }
    const missing = lost.records.filter((r) => !r.recordKey || !have.has(r.recordKey));
    if (!missing.length) return;
    const calls = new Set(missing.map((r) => callOfRecord(r.recordKey ?? "")));
    // A lease-admitted request's cost went to the lease's entry Redis lost (a re-asserted lease no
    // longer holds it): settled again as a request whose entry is gone, at its full cost.
    for (const s of lost.settles) this.writes.resettle(s.key, s.month, settlesOf(s.settles, calls).map((x) => (x.lease ? { id: x.id, actual: x.actual, reserved: 0 } : x)));
    await this.writes.flush();
    for (const r of missing) this.queue.push(r);
    await this.queue.flushQueued();
    this.ctx.log.warn({ records: missing.length }, "Redis lost usage records no instance had drained: written from this instance's copies");
  }

  private keepLost(more: { records: UsageRow[]; settles: SentSettles[] }): void {
    if (!more.records.length) return;
    this.lost = this.lost ? { records: this.lost.records.concat(more.records), settles: this.lost.settles.concat(more.settles) } : more;
  }

  /** Drops the copies of batches the drain has committed (read before the epoch: see recover()). */
  async pruneUnacked(): Promise<void> {
    if (this.writes.unacked.size === 0) return;
    const epoch = this.epoch;
    const w = await drainedUpTo(this.r, this.k.stream, GROUP);
    if (w === null || this.gate || this.epoch !== epoch || (await this.r.get(this.k.epoch)) !== epoch) return;
    this.writes.unacked.prune(w);
  }
}
