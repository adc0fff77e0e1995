// Instances and their standing: every instance writes `instances[<id>] = now` each heartbeat; one
// instance at a time (a lock) turns the in-flight entries of an instance silent for
// INSTANCE_DEAD_AFTER_SECONDS into `interrupted` records at their reserved cost (which stays in
// the counter) and removes them; its budget leases give back what their requests did not hold
// (CONTRACT §7).
import type { Base } from "../../base.ts";
import { randomToken } from "../../lib/crypto.ts";
import type { Cmds } from "../../store/kv/redis.ts";
import { addingKey, counterKey, inflightKey, settledKey, ttl } from "../counters.ts";
import { interruptedRow } from "./facts.ts";
import type { EntryFacts, LedgerKeys } from "./types.ts";
import { packIds, packSettles, parseEntry } from "./wire.ts";

/** The reconcile lock's shortest life, whatever INSTANCE_DEAD_AFTER_SECONDS says. */
const MIN_LOCK_MS = 5_000;
/**
 * Routing keys looked at per round trip. The key set holds every key that ever had a ledger entry
 * (a fleet's thousands): a reconcile reads it a page at a time and each page's in-flight ledgers
 * together, not the whole set in one reply and one round trip per key.
 */
const PAGE = 500;

export class Reconciler {
  /** Gateway instances with a recent heartbeat (this one included), as of the last reconcile. */
  liveInstances = 1;

  constructor(private ctx: Base, private r: Cmds, private k: LedgerKeys) {}

  beat(): Promise<number> {
    return this.r.hset(this.k.instances, this.ctx.instanceId, Date.now());
  }

  /**
   * An instance's standing: `alive` (recent heartbeat: work it holds may still be running), `dead`
   * (silent, its in-flight entries not yet reconciled) or `gone` (unlisted: reconciled, so its
   * in-flight requests' records are on the usage stream).
   */
  async instanceState(instance: string): Promise<"alive" | "dead" | "gone"> {
    const t = await this.r.hget(this.k.instances, instance);
    if (t === null) return "gone";
    return Date.now() - Number(t) <= this.ctx.config.INSTANCE_DEAD_AFTER_SECONDS * 1000 ? "alive" : "dead";
  }

  /**
   * Turns the in-flight entries of dead instances into `interrupted` records; one reconciler at a
   * time. `sweep`: also look at entries of instances not listed at all (lost with a Redis restart).
   */
  async reconcile(sweep: boolean): Promise<number> {
    const me = this.ctx.instanceId;
    const deadAfter = this.ctx.config.INSTANCE_DEAD_AFTER_SECONDS * 1000;
    const now = Date.now();
    const beats = await this.r.hgetall(this.k.instances);
    const dead = Object.entries(beats).filter(([id, t]) => id !== me && now - Number(t) > deadAfter).map(([id]) => id);
    this.liveInstances = Math.max(1, Object.keys(beats).length - dead.length);
    if (!dead.length && !sweep) return 0;
    const token = randomToken(6);
    // The lock lasts as long as an instance takes to be declared dead: a reconciler killed while
    // holding it delays the next reconcile by no more than it delays any death's. A slow but live
    // reconciler overlapped by the next one is harmless: each record is written once (the unique
    // index) and each entry written off once (the script removes it).
    const lockMs = Math.max(MIN_LOCK_MS, deadAfter);
    if ((await this.r.set(this.k.lock, token, "PX", lockMs, "NX")) !== "OK") return 0;
    let n = 0;
    try {
      const deadSet = new Set(dead);
      const minute = Math.floor(now / 60_000);
      let cursor = "0";
      do {
        const [next, keyIds] = await this.r.sscan(this.k.keyset, cursor, "COUNT", PAGE);
        cursor = next;
        // A key seen twice (SSCAN may repeat one) is harmless: each record is written once (the
        // unique index) and each entry written off once (the script removes it).
        const ledgers = await Promise.all(keyIds.map((keyId) => this.r.hgetall(inflightKey(keyId))));
        for (let i = 0; i < keyIds.length; i++) n += await this.writeOffGone(keyIds[i]!, ledgers[i]!, deadSet, beats, minute, now);
      } while (cursor !== "0");
      if (dead.length) await this.r.hdel(this.k.instances, ...dead);
    } finally {
      if ((await this.r.get(this.k.lock)) === token) await this.r.del(this.k.lock);
    }
    if (n) this.ctx.log.warn({ interrupted: n, instances: dead }, "reconciled requests of gateway instances that died");
    return n;
  }

  /**
   * The entries of one key's in-flight ledger whose instance is gone, as `interrupted` records, then
   * written off. A lease's requests first (each at its worst case, moved out of the lease's entry),
   * then the lease itself, whose rest goes back to the counter with no record: a crash charges the
   * requests that were in flight, never the unused part of a slice (CONTRACT §7).
   */
  private async writeOffGone(keyId: string, entries: Record<string, string>, deadSet: Set<string>, beats: Record<string, string>, minute: number, now: number): Promise<number> {
    const me = this.ctx.instanceId;
    const deadAfter = this.ctx.config.INSTANCE_DEAD_AFTER_SECONDS * 1000;
    const leased: Array<[string, EntryFacts]> = [];
    const leases: Array<[string, EntryFacts]> = [];
    const own: Array<[string, EntryFacts, number]> = [];
    for (const [requestId, value] of Object.entries(entries)) {
      const e = parseEntry(value);
      if (!e) continue;
      const f = e.facts;
      const gone = deadSet.has(f.i) || (!(f.i in beats) && now - f.t > deadAfter);
      if (!gone || f.i === me) continue;
      if (typeof f.l === "string") leased.push([requestId, f]);
      else if (f.ls === 1) leases.push([requestId, f]);
      else own.push([requestId, f, e.nano]);
    }
    let n = 0;
    // The record first: if this reconciler dies before the write-off, the next one writes it
    // again and the unique index keeps one.
    for (const [requestId, f] of leased) {
      const w = Math.max(0, Math.round(f.w ?? 0));
      await this.r.xadd(this.k.stream, "*", "r", JSON.stringify([interruptedRow(keyId, requestId, f, w, now)]));
      n += await this.r.gwWriteOffLeased(inflightKey(keyId), settledKey(keyId, minute), addingKey(keyId, f.m), counterKey(keyId, f.m), requestId, f.l!, w, ttl());
    }
    for (const [leaseId, f] of leases) {
      // The lease's end, as its instance would have sent it: what it still holds leaves the counter.
      await this.r.gwLedger(counterKey(keyId, f.m), inflightKey(keyId), settledKey(keyId, minute), settledKey(keyId, minute - 1), addingKey(keyId, f.m), ttl(), "", packSettles([{ id: leaseId, actual: 0, reserved: 0, closes: true }]), packIds([leaseId]));
    }
    for (const [requestId, f, nano] of own) {
      await this.r.xadd(this.k.stream, "*", "r", JSON.stringify([interruptedRow(keyId, requestId, f, nano, now)]));
      n += await this.r.gwWriteOff(inflightKey(keyId), settledKey(keyId, minute), addingKey(keyId, f.m), requestId);
    }
    return n;
  }
}
