// The ledger's writes (CONTRACT §7), batched off the hot path: the in-flight entries of keys
// without a budget, every settlement and every finished attempt's usage record of one event-loop
// turn go out as one LEDGER script call per routing key and month plus one XADD, not per request
// (in pieces of at most MAX_BATCH items, so no call runs long in Redis).
// (A budgeted key's entry rides on its reservation's own script call: admission().)
//
//   settlement  removes the entry and applies real − reserved to the counter, idempotent by
//               request id (markers kept two minutes); a settlement whose entry is gone adds its
//               full cost;
//   records     go to the usage stream; this instance keeps a copy of each batch until a drain has
//               committed it (unacked.ts), so a Redis restart without persistence loses no record;
//   leases      a request admitted from a budget lease (leases.ts) has an in-flight entry of its
//               own, holding nothing in the counter (the lease's entry holds its worst case): the
//               entries of one turn go out together, before the upstream calls, without waiting for
//               the settlements and records, which wait up to LATER_MS for a batch. A crash leaves
//               each unsettled request's entry for the reconciler (one `interrupted` record at its
//               worst case, taken out of the lease's entry), and the lease's rest goes back;
//   rebuilds    settlements that find the counter missing are put in the month's adding set by
//               the same script; the counter is rebuilt leaving their records out, and they add
//               their cost to it (store/kv/ledger-scripts.ts has the orderings).
import type { Base } from "../../base.ts";
import type { Cmds } from "../../store/kv/redis.ts";
import type { LedgerEntry } from "../../store/kv/types.ts";
import { sanitizeUsageRow, type UsageQueue, type UsageRow } from "../../relay/usage-queue.ts";
import { addingKey, counterKey, inflightKey, seed, settledKey, ttl, type BudgetedKey } from "../counters.ts";
import { UnackedRecords } from "./unacked.ts";
import type { FactsJson, LedgerKeys, LocalEntry, SentSettles, Settlement, WriteGroup } from "./types.ts";
import { packAdds, packEntries, packIds, packSettles } from "./wire.ts";

const RETRY_MS = 1000;
/** The longest the writes of lease-admitted requests wait for a batch. */
export const LATER_MS = 1000;
/**
 * The most records in one usage stream entry, and in-flight entries or settlements in one LEDGER
 * call. A hot leased key gathers up to LATER_MS of its traffic per batch: at thousands of requests
 * a second, one script call of every settlement ran so long in Redis (and one entry of every record
 * grew to megabytes) that the reply watchdog took Redis for frozen and dropped the connection,
 * failing every command under way, and the retried batch only grew. A batch that reaches this
 * size goes out at once, and a larger one (a retry) in pieces of this size.
 */
export const MAX_BATCH = 500;

export class LedgerWrites {
  /** This instance's requests in flight (re-asserted after Redis loses its state). */
  readonly local = new Map<string, LocalEntry>();
  private knownKeys = new Set<string>();
  private groups = new Map<string, WriteGroup>();
  /** Groups whose ledger call is under way (their settlements are pending until it returns). */
  private sending = new Set<WriteGroup>();
  /** Groups whose settlements found the counter missing, until they are added to the rebuilt one. */
  private rebuilding = new Set<WriteGroup>();
  /**
   * Calls this instance put in an adding set (after a missing counter, or put back after Redis
   * lost its state): their settlement takes them out again in the script that applies it.
   */
  private inAdding = new Set<string>();
  /**
   * Resolves once this instance has checked the epoch and, when Redis lost its state, the
   * recovery barrier has passed (set by the ledger: Epoch.checkEpoch). A rebuild waits for it.
   */
  recovered: () => Promise<void> = async () => {};
  private records: UsageRow[] = [];
  private scheduled = false;
  private entriesScheduled = false;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private laterTimer: ReturnType<typeof setTimeout> | null = null;
  /**
   * The sends of every flush so far, settled or not. A flush returns once its own sends and every
   * earlier flush's are done: a caller that flushes to see its writes in Redis (the usage
   * pipeline's flush, shutdown, a recovery) must not return while a turn's flush that took those
   * writes a moment earlier is still sending them.
   */
  private sent: Promise<unknown> = Promise.resolve();
  /** Copies of the records this instance streamed that no drain has committed yet. */
  readonly unacked = new UnackedRecords((rows) => this.ctx.log.error({ rows }, "usage stream not drained for long: dropped this instance's oldest copies of streamed records"));

  constructor(private ctx: Base, private r: Cmds, private queue: UsageQueue, private k: LedgerKeys) {}

  /** True while writes wait for the next flush. */
  get pending(): boolean {
    return this.groups.size > 0;
  }

  registerKey(keyId: string): void {
    if (this.knownKeys.has(keyId)) return;
    this.knownKeys.add(keyId);
    // Sent before the entry (same pipeline), so the reconciler can always find the key's ledger.
    this.r.sadd(this.k.keyset, keyId).catch(() => this.knownKeys.delete(keyId));
  }

  /** Redis lost its state: every key is registered again with its next write. */
  forgetKeys(): void {
    this.knownKeys.clear();
  }

  /** The entry a budgeted reservation writes in its own script call (the grant is appended there). */
  admission(keyId: string, requestId: string, facts: FactsJson): LedgerEntry {
    this.registerKey(keyId);
    return { ledger: inflightKey(keyId), id: requestId, value: facts };
  }

  admitted(key: BudgetedKey, requestId: string, month: string, facts: FactsJson, nano: number): void {
    this.local.set(requestId, { id: requestId, key, month, facts, nano });
  }

  /** An entry without a reservation (keys without a budget; /blitz prompt shares): batched per turn. */
  enter(key: BudgetedKey, requestId: string, month: string, facts: FactsJson, nano = 0): void {
    this.registerKey(key.id);
    const e: LocalEntry = { id: requestId, key, month, facts, nano };
    this.local.set(requestId, e);
    this.group(key, month).enters.push(e);
    this.schedule();
  }

  /**
   * A request admitted from a lease: its entry (facts naming the lease and its worst case; 0 held
   * in the counter) goes out with this turn's entries, ahead of the batch its settlement waits for.
   */
  enterLeased(key: BudgetedKey, requestId: string, month: string, facts: FactsJson): void {
    this.registerKey(key.id);
    const e: LocalEntry = { id: requestId, key, month, facts, nano: 0 };
    this.local.set(requestId, e);
    this.group(key, month).enters.push(e);
    this.scheduleEntries();
  }

  settle(key: BudgetedKey, requestId: string, month: string, reservedNano: number, actualNano: number): void {
    this.local.delete(requestId);
    this.group(key, month).settles.push({ id: requestId, actual: actualNano, reserved: reservedNano });
    this.schedule();
  }

  /**
   * A request admitted from a lease: its cost moves from the lease's entry to its record, in the
   * next batch (at most LATER_MS away).
   */
  settleLeased(key: BudgetedKey, month: string, lease: string, requestId: string, reservedNano: number, actualNano: number): void {
    this.local.delete(requestId);
    const g = this.group(key, month);
    g.settles.push({ id: requestId, actual: actualNano, reserved: reservedNano, lease });
    if (g.settles.length >= MAX_BATCH) this.schedule();
    else this.scheduleLater();
  }

  /**
   * A lease's end: what it did not use goes back to the counter at once (the month's spend reads
   * the counter), with its requests' settlements still waiting for their batch, ahead of it.
   */
  closeLease(key: BudgetedKey, month: string, lease: string): void {
    this.local.delete(lease);
    this.group(key, month).settles.push({ id: lease, actual: 0, reserved: 0, closes: true });
    this.schedule();
  }

  /** Settlements sent again (after Redis lost them with its state), with the next flush. */
  resettle(key: BudgetedKey, month: string, settles: readonly Settlement[]): void {
    if (settles.length) this.group(key, month).settles.push(...settles);
  }

  /** `later`: a request admitted from a lease (its record waits for the lease's batch). */
  record(row: UsageRow, later = false): void {
    // Sanitised before it is streamed: the drain writes the streamed text as it is (pushJson).
    this.records.push(sanitizeUsageRow(row));
    if (later && this.records.length < MAX_BATCH) this.scheduleLater();
    else this.schedule();
  }

  private group(key: BudgetedKey, month: string): WriteGroup {
    const id = `${key.id}|${month}`;
    let g = this.groups.get(id);
    if (!g) this.groups.set(id, (g = { key, month, enters: [], settles: [] }));
    return g;
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => void this.flush());
  }

  /** This turn's in-flight entries alone, when nothing else is due sooner. */
  private scheduleEntries(): void {
    if (this.scheduled || this.entriesScheduled) return;
    this.entriesScheduled = true;
    setImmediate(() => void this.flushEntries());
  }

  /**
   * Sends the in-flight entries waiting (one LEDGER call per key and month), leaving settlements
   * and records for their batch. Called at the end of the turn that admitted them, and by a
   * request about to go upstream whose entry is still waiting (MoneyCall.beforeUpstream): so an
   * entry is always on its way to Redis before its upstream call.
   */
  flushEntries(): Promise<void> {
    this.entriesScheduled = false;
    const jobs: Promise<unknown>[] = [];
    const minute = Math.floor(Date.now() / 60_000);
    for (const [id, g] of this.groups) {
      if (!g.enters.length) continue;
      const enters = g.enters;
      g.enters = [];
      if (!g.settles.length) this.groups.delete(id);
      for (const piece of pieces({ key: g.key, month: g.month, enters, settles: [] })) jobs.push(this.send(piece, minute));
    }
    if (!jobs.length) return Promise.resolve();
    const all = Promise.all([this.sent, ...jobs]);
    this.sent = all.catch(() => {});
    return all.then(() => {});
  }

  /** True while some in-flight entry waits to be sent. */
  get entriesPending(): boolean {
    return this.entriesScheduled;
  }

  private scheduleLater(): void {
    if (this.scheduled || this.laterTimer) return;
    this.laterTimer = setTimeout(() => void this.flush(), LATER_MS);
  }

  /**
   * Mirrors what Redis now holds for each lease of this instance (what its settled requests did
   * not take out of it), which a recovery re-asserts if Redis loses its state.
   */
  private applied(g: WriteGroup): void {
    for (const s of g.settles) {
      if (!s.lease) continue;
      const l = this.local.get(s.lease);
      if (l) l.nano -= Math.min(s.actual, l.nano);
    }
  }

  private requeue(g: WriteGroup): void {
    const into = this.group(g.key, g.month);
    into.enters = g.enters.concat(into.enters);
    into.settles = g.settles.concat(into.settles);
    this.retryTimer ??= setTimeout(() => {
      this.retryTimer = null;
      void this.flush();
    }, RETRY_MS);
  }

  /**
   * What this instance re-asserts after Redis lost its state, by key and month: its entries in
   * flight and its settlements with a cost not applied yet (waiting, being sent, or waiting to be
   * added to a rebuilt counter), whose records may already be in Postgres.
   */
  reassertion(): Array<{ key: BudgetedKey; month: string; entries: LocalEntry[]; pending: string[] }> {
    const byKey = new Map<string, { key: BudgetedKey; month: string; entries: LocalEntry[]; pending: string[] }>();
    const at = (key: BudgetedKey, month: string) => {
      const k = `${key.id}|${month}`;
      let v = byKey.get(k);
      if (!v) byKey.set(k, (v = { key, month, entries: [], pending: [] }));
      return v;
    };
    for (const l of this.local.values()) at(l.key, l.month).entries.push(l);
    for (const g of [...this.groups.values(), ...this.sending, ...this.rebuilding]) {
      for (const s of g.settles) if (!s.closes && s.actual > 0) at(g.key, g.month).pending.push(s.id);
    }
    return [...byKey.values()];
  }

  /** Redis lost its state (and every adding set): the calls REASSERT put back are marked again. */
  resetAdding(): void {
    this.inAdding.clear();
  }

  /** Calls REASSERT put in an adding set. */
  markAdding(ids: Iterable<string>): void {
    for (const id of ids) this.inAdding.add(id);
  }

  /**
   * What this instance holds for Postgres, written before a counter rebuild reads Postgres. A
   * held pipeline (tests) writes later by design, and is left held.
   */
  private writeQueued(): Promise<void> {
    return this.queue.held() ? Promise.resolve() : this.queue.flushQueued();
  }

  /**
   * Rebuilds a missing counter (leaving out the records of its adding set, which holds this
   * group's settlements since the ledger script found the counter missing) and adds their cost,
   * each call's only while it is still in the set (ADD_REBUILT). The script has already marked them
   * settled, so a failure here (Postgres or Redis away) retries this step alone: sending the group
   * again would find them marked and add nothing. Never awaited by flush(): it may wait for the
   * recovery barrier, which a recovery's own flush must not wait on.
   */
  private addToRebuilt(g: WriteGroup): Promise<void> {
    const id = g.key.id;
    const adds = g.settles.filter((s) => !s.closes && s.actual > 0);
    return (async () => {
      // After Redis lost its state, no counter is rebuilt before the recovery barrier: by then
      // every live instance has put its own calls in flight back in the adding set (REASSERT).
      await this.recovered();
      // What this instance still holds for Postgres goes first: those records' settlements went
      // to the counter Redis lost, so a rebuild that ran before they land would leave them out.
      await this.writeQueued();
      await seed(this.ctx, g.key, g.month);
      if ((await this.r.gwAddRebuilt(counterKey(id, g.month), addingKey(id, g.month), ttl(), packAdds(adds))) < 0) throw new Error("the counter went missing again");
      this.rebuilding.delete(g);
      for (const s of adds) this.inAdding.delete(s.id);
    })().catch((e) => {
      this.ctx.log.warn({ keyId: id, err: e instanceof Error ? e.message : String(e) }, "counter rebuild failed; retrying");
      setTimeout(() => void this.addToRebuilt(g), RETRY_MS).unref?.();
    });
  }

  /** Sends this turn's writes: one XADD of the usage records, one LEDGER call per key and month (each in pieces of at most MAX_BATCH). */
  async flush(): Promise<void> {
    this.scheduled = false;
    if (this.laterTimer) clearTimeout(this.laterTimer);
    this.laterTimer = null;
    const groups = this.groups;
    const records = this.records;
    this.groups = new Map();
    this.records = [];
    const jobs: Promise<unknown>[] = [];
    if (records.length) {
      const settles: SentSettles[] = [];
      for (const g of groups.values()) if (g.settles.length) settles.push({ key: g.key, month: g.month, settles: g.settles });
      // The settlements ride with the last piece: its copy is dropped only once every piece is drained.
      for (let i = 0; i < records.length; i += MAX_BATCH) {
        const last = i + MAX_BATCH >= records.length;
        jobs.push(this.stream(records.length <= MAX_BATCH ? records : records.slice(i, i + MAX_BATCH), last ? settles : []));
      }
    }
    const minute = Math.floor(Date.now() / 60_000);
    for (const g of [...groups.values()].flatMap(pieces)) jobs.push(this.send(g, minute));
    const all = Promise.all([this.sent, ...jobs]);
    this.sent = all.catch(() => {});
    await all;
  }

  /** One LEDGER call of a group (at most MAX_BATCH items); retried on a connection failure. */
  private send(g: WriteGroup, minute: number): Promise<unknown> {
    const id = g.key.id;
    this.sending.add(g);
    // Ids this instance put in the adding set: taken out by the script that applies their cost.
    const leaving = this.inAdding.size ? g.settles.filter((s) => this.inAdding.has(s.id)).map((s) => s.id) : [];
    return this.r.gwLedger(counterKey(id, g.month), inflightKey(id), settledKey(id, minute), settledKey(id, minute - 1), addingKey(id, g.month), ttl(), packEntries(g.enters), packSettles(g.settles), packIds(leaving))
      .then((full) => {
        this.applied(g);
        if (full < 0) {
          for (const c of leaving) this.inAdding.delete(c);
          // Put in the set by a REASSERT that ran while this call was on its way (Redis lost its
          // state meanwhile): the cost is applied, so the id leaves the set now. Until it does, a
          // rebuild cannot count it wrongly: that would need the counter lost again, and the set
          // with it. Only after a restart, never on the hot path.
          const late = this.inAdding.size ? g.settles.filter((s) => this.inAdding.has(s.id)).map((s) => s.id) : [];
          if (late.length) {
            for (const c of late) this.inAdding.delete(c);
            this.r.srem(addingKey(id, g.month), ...late).catch(() => {});
          }
          return;
        }
        if (full === 0) return;
        // The counter was missing (first use this month, or Redis lost it): the script put this
        // group's settlements in the adding set, so no rebuild, here or on another instance,
        // counts their records (which the usage stream may have written to Postgres meanwhile)
        // before they add their cost to it.
        for (const s of g.settles) if (!s.closes && s.actual > 0) this.inAdding.add(s.id);
        this.rebuilding.add(g);
        void this.addToRebuilt(g);
      })
      .catch((e) => {
        // The script itself is broken: the same call would fail again, so it is not retried.
        // Anything else (connection, timeout, LOADING after a restart) is retried.
        if (e instanceof Error && e.name === "ReplyError" && /Error (compiling|running) script/.test(e.message)) {
          this.ctx.log.error({ keyId: id, err: e.message }, "ledger write refused by Redis: dropped");
          return;
        }
        this.ctx.log.warn({ err: e instanceof Error ? e.message : String(e) }, "ledger write failed; retrying");
        this.requeue(g);
      })
      .finally(() => this.sending.delete(g));
  }

  /** One usage stream entry; kept until drained (`settles` with it), or queued for Postgres when Redis cannot take it. */
  private stream(records: UsageRow[], settles: SentSettles[]): Promise<void> {
    return this.r.xadd(this.k.stream, "*", "r", JSON.stringify(records)).then((id) => {
      if (id) this.unacked.keep(id, records, settles);
    }, (e) => {
      // Redis cannot take them: the records go straight to the Postgres queue (a later
      // redelivery of the same records is a no-op there).
      this.ctx.log.warn({ err: e instanceof Error ? e.message : String(e) }, "usage stream unavailable; records queued for Postgres directly");
      for (const row of records) this.queue.push(row);
    });
  }
}

/**
 * A group as LEDGER calls of at most MAX_BATCH items: its in-flight entries first, then its
 * settlements in order. Calls on one connection run in the order sent, so every entry is written
 * before a settlement of it, and a lease's close after its requests' settlements.
 */
function pieces(g: WriteGroup): WriteGroup[] {
  if (g.enters.length + g.settles.length <= MAX_BATCH) return [g];
  const out: WriteGroup[] = [];
  for (let i = 0; i < g.enters.length; i += MAX_BATCH) out.push({ key: g.key, month: g.month, enters: g.enters.slice(i, i + MAX_BATCH), settles: [] });
  for (let i = 0; i < g.settles.length; i += MAX_BATCH) out.push({ key: g.key, month: g.month, enters: [], settles: g.settles.slice(i, i + MAX_BATCH) });
  return out;
}
