// The durable in-flight ledger (CONTRACT §7: a request that reached an upstream has exactly one
// usage record even if the gateway is SIGKILLed mid-request or Redis restarts empty). Redis mode
// only; the embedded mode (one process, in-process KV) keeps usage in its in-memory queue, written
// to PGlite every second and drained on SIGTERM (README "What survives what").
//
//   admission   the reservation script also writes `gw:{k:<key>}:inflight[<request id>]` (same
//               round trip; keys without a budget get theirs in the per-turn batch below);
//   attempts    every finished attempt's usage record goes to the stream `gw:usage`;
//   settlement  removes the entry and applies real − reserved to the counter, idempotent by
//               request id (markers kept two minutes), a settlement whose entry is gone adds its
//               full cost;
//   draining    any instance reads `gw:usage` with XREADGROUP, inserts into Postgres (a unique
//               index on request id + attempt makes a redelivery a no-op), then XACKs; the
//               instance that sent a batch keeps a copy until the stream's acknowledged watermark
//               passes it (unacked.ts), so a Redis restart without persistence loses no record;
//   heartbeat   `gw:instances[<instance>] = now` every second;
//   reconciler  one instance at a time (lock `gw:reconcile:lock`) turns the entries of an
//               instance silent for INSTANCE_DEAD_AFTER_SECONDS into `interrupted` records at their
//               reserved cost (which stays in the counter) and removes them;
//   epoch       `gw:epoch` vanishing or changing means Redis lost its state: admissions wait while
//               this instance re-asserts its own in-flight entries onto the rebuilt counters.
//
// Hot path cost: the writes of one event-loop turn (entries of keys without a budget, settlements,
// usage records) go out as one LEDGER script call per routing key plus one XADD, not per request.
import { inArray } from "drizzle-orm";
import { resolve } from "node:path";
import type { Base } from "../../context.ts";
import { intervalJob, type Job } from "../../jobs/job.ts";
import { randomToken, sha256Hex } from "../../lib/crypto.ts";
import type { Cmds } from "../../store/kv/redis.ts";
import type { LedgerEntry } from "../../store/kv/types.ts";
import { usageRecords } from "../../store/db/schema/index.ts";
import type { UsageQueue, UsageRow } from "../usage-queue.ts";
import { counterKey, fromNano, inflightKey, seed, settledKey, ttl, type BudgetedKey } from "./counters.ts";
import { masterIdentity } from "./redis-identity.ts";
import { callOfRecord, drainedUpTo, settlesOf, UnackedRecords, type SentSettles } from "./unacked.ts";

const GROUP = "gw-usage";
const HEARTBEAT_MS = 1000;
/**
 * A drain costs two Postgres statements and four Redis commands whatever it carries, and stops
 * once the stream is caught up. (A slower drain once seemed to lose an outage's spend from a
 * rebuilt counter; the cause was a rebuild reading Postgres before this instance's queued records
 * reached it, fixed in flush() and recover().)
 */
const DRAIN_MS = 200;
/** Stream entries read per round; a tick reads on while rounds come back full. */
const DRAIN_BATCH = 200;
const RETRY_MS = 1000;
/** A stream entry delivered to a consumer that did not acknowledge it this long is taken over. */
const CLAIM_IDLE_MS = 15_000;

/** What an in-flight entry remembers to write an `interrupted` record for it. */
export interface EntryFacts {
  /** instance */ i: string;
  /** month */ m: string;
  /** started at (ms) */ t: number;
  /** account */ a: string;
  /** endpoint */ e: string;
  /** provider (the key's first lane) */ p: string;
  /** model asked for */ md: string | null;
  /** seat traffic */ s: boolean;
  /** the request id the client saw */ r: string | null;
}

interface Local {
  key: BudgetedKey;
  month: string;
  value: string;
  nano: number;
}

interface Group {
  key: BudgetedKey;
  month: string;
  /** "id\tentry|grant\n" lines (LEDGER's packed arguments). */
  enters: string;
  /** "id\tactual\treserved\n" lines. */
  settles: string;
}

export class Ledger {
  /** This instance's requests in flight (re-asserted after Redis loses its state). */
  private local = new Map<string, Local>();
  private knownKeys = new Set<string>();
  private groups = new Map<string, Group>();
  private records: UsageRow[] = [];
  private scheduled = false;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private epoch: string | null = null;
  /** Set while re-asserting after a Redis restart: admissions wait for it. */
  gate: Promise<void> | null = null;
  /** Copies of the records this instance streamed that no drain has committed yet. */
  private unacked = new UnackedRecords((rows) => this.ctx.log.error({ rows }, "usage stream not drained for long: dropped this instance's oldest copies of streamed records"));
  /** Rows this instance streamed that no drain has committed yet (its copies). */
  get unackedRecords(): number {
    return this.unacked.size;
  }
  /** Copies taken when Redis lost the stream, until they are written (retried every heartbeat). */
  private lost: { records: UsageRow[]; settles: SentSettles[] } | null = null;
  readonly jobs: Job[];
  /**
   * The ledger's shared keys, named per deployment (the Postgres the records go to): gateways that
   * share a Redis but not a database never drain or reconcile each other's records.
   */
  readonly k: { stream: string; instances: string; keyset: string; epoch: string; lock: string };

  constructor(private ctx: Base, private r: Cmds, private queue: UsageQueue) {
    const db = ctx.config.DATABASE_URL ? ctx.config.DATABASE_URL.replace(/\/\/[^@/]*@/, "//") : `pglite:${resolve(ctx.config.DATA_DIR)}`;
    const ns = `gw:d:${sha256Hex(db).slice(0, 12)}`;
    this.k = { stream: `${ns}:usage`, instances: `${ns}:instances`, keyset: `${ns}:ledger-keys`, epoch: `${ns}:epoch`, lock: `${ns}:reconcile-lock` };
    this.jobs = [
      intervalJob(ctx, "ledger-heartbeat", HEARTBEAT_MS, () => this.heartbeat()),
      intervalJob(ctx, "usage-stream-drain", DRAIN_MS, async () => {
        if (!this.queue.isPaused()) await this.drain();
      }),
    ];
  }

  get me(): string {
    return this.ctx.instanceId;
  }

  private factsHead = new Map<string, string>();

  /** The entry's facts as JSON (EntryFacts); the part fixed per key, endpoint and month is built once. */
  facts(key: { id: string; accountId: string; lanes: Array<{ provider: string }> }, endpoint: string, model: string | null, month: string, requestId: string | null = null): string {
    const hk = `${key.id}|${endpoint}|${month}`;
    let head = this.factsHead.get(hk);
    if (head === undefined) {
      if (this.factsHead.size > 10_000) this.factsHead.clear();
      head = JSON.stringify({ i: this.me, m: month, a: key.accountId, e: endpoint, p: key.lanes[0]?.provider ?? "unknown", s: false }).slice(0, -1);
      this.factsHead.set(hk, head);
    }
    return `${head},"t":${Date.now()},"md":${model === null ? "null" : JSON.stringify(model)},"r":${requestId === null ? "null" : JSON.stringify(requestId)}}`;
  }

  private registerKey(keyId: string): void {
    if (this.knownKeys.has(keyId)) return;
    this.knownKeys.add(keyId);
    // Sent before the entry (same pipeline), so the reconciler can always find the key's ledger.
    this.r.sadd(this.k.keyset, keyId).catch(() => this.knownKeys.delete(keyId));
  }

  /** The entry a budgeted reservation writes in its own script call. */
  admission(keyId: string, requestId: string, facts: string): LedgerEntry {
    this.registerKey(keyId);
    return { ledger: inflightKey(keyId), id: requestId, value: facts };
  }

  admitted(key: BudgetedKey, requestId: string, month: string, facts: string, nano: number): void {
    this.local.set(requestId, { key, month, value: `${facts}|${nano}`, nano });
  }

  /** An entry without a reservation (keys without a budget; /blitz prompt shares): batched per turn. */
  enter(key: BudgetedKey, requestId: string, month: string, facts: string, nano = 0): void {
    this.registerKey(key.id);
    const value = `${facts}|${nano}`;
    this.local.set(requestId, { key, month, value, nano });
    this.group(key, month).enters += `${requestId}\t${value}\n`;
    this.schedule();
  }

  settle(key: BudgetedKey, requestId: string, month: string, reservedNano: number, actualNano: number): void {
    this.local.delete(requestId);
    this.group(key, month).settles += `${requestId}\t${actualNano}\t${reservedNano}\n`;
    this.schedule();
  }

  record(row: UsageRow): void {
    this.records.push(row);
    this.schedule();
  }

  private group(key: BudgetedKey, month: string): Group {
    const id = `${key.id}|${month}`;
    let g = this.groups.get(id);
    if (!g) this.groups.set(id, (g = { key, month, enters: "", settles: "" }));
    return g;
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => void this.flush());
  }

  private requeue(g: Group): void {
    const into = this.group(g.key, g.month);
    into.enters = g.enters + into.enters;
    into.settles = g.settles + into.settles;
    this.retryTimer ??= setTimeout(() => {
      this.retryTimer = null;
      void this.flush();
    }, RETRY_MS);
  }

  /** Sends this turn's writes: one XADD of the usage records, one LEDGER call per key and month. */
  async flush(): Promise<void> {
    this.scheduled = false;
    const groups = this.groups;
    const records = this.records;
    this.groups = new Map();
    this.records = [];
    const log = (what: string) => (e: unknown) => this.ctx.log.warn({ err: e instanceof Error ? e.message : String(e) }, what);
    const jobs: Promise<unknown>[] = [];
    if (records.length) {
      const settles: SentSettles[] = [];
      for (const g of groups.values()) if (g.settles) settles.push({ key: g.key, month: g.month, settles: g.settles });
      jobs.push(this.r.xadd(this.k.stream, "*", "r", JSON.stringify(records)).then((id) => {
        if (id) this.unacked.keep(id, records, settles);
      }, (e) => {
        // Redis cannot take them: the records go straight to the Postgres queue (a later
        // redelivery of the same records is a no-op there).
        log("usage stream unavailable; records queued for Postgres directly")(e);
        for (const row of records) this.queue.push(row);
      }));
    }
    const minute = Math.floor(Date.now() / 60_000);
    for (const g of groups.values()) {
      const id = g.key.id;
      jobs.push(this.r.gwLedger(counterKey(id, g.month), inflightKey(id), settledKey(id, minute), settledKey(id, minute - 1), ttl(), g.enters, g.settles)
        .then(async (full) => {
          if (full <= 0) return;
          // The counter was missing (first use this month, or Redis lost it): rebuild, then add.
          // The rebuild leaves out this group's own records, which the usage stream may have
          // written to Postgres meanwhile, so they are not counted twice. Records this instance
          // still holds for Postgres (queued straight there while Redis was away) are written
          // first: their settlements went to the counter Redis lost, so a rebuild that ran
          // before they land would leave them out for good.
          await this.queue.flushQueued();
          await seed(this.ctx, g.key, g.month, settledCalls(g.settles));
          await this.r.incrby(counterKey(id, g.month), full);
        })
        .catch((e) => {
          // The script itself is broken: the same call would fail again, so it is not retried.
          // Anything else (connection, timeout, LOADING after a restart) is retried.
          if (e instanceof Error && e.name === "ReplyError" && /Error (compiling|running) script/.test(e.message)) {
            this.ctx.log.error({ keyId: id, err: e.message }, "ledger write refused by Redis: dropped");
            return;
          }
          log("ledger write failed; retrying")(e);
          this.requeue(g);
        }));
    }
    await Promise.all(jobs);
  }

  // ---- heartbeat, epoch, re-assertion, reconciliation ----

  async start(): Promise<void> {
    // Back from an outage: settlements kept while Redis was away go out first, ahead of anything
    // this instance sends on the new connection (one connection runs commands in order), so a
    // counter Redis lost is rebuilt by them (leaving their records out of the rebuild) and not by
    // a reader that would find their records already in Postgres and then get them added again.
    this.r.on("ready", () => {
      if (this.groups.size) void this.flush();
      // Set before this turn ends: no admission on the new connection runs ahead of the check.
      if (!this.gate) void this.checkMaster().catch(() => {});
    });
    this.master = await masterIdentity(this.r);
    await this.ensureGroup();
    this.epoch = await this.r.get(this.k.epoch);
    if (this.epoch === null) {
      const mine = randomToken(8);
      await this.r.set(this.k.epoch, mine, "NX");
      this.epoch = await this.r.get(this.k.epoch);
    }
    await this.r.hset(this.k.instances, this.me, Date.now());
    for (const j of this.jobs) j.start();
  }

  private async ensureGroup(): Promise<void> {
    await this.r.xgroup("CREATE", this.k.stream, GROUP, "0", "MKSTREAM").catch((e: Error) => {
      if (!/BUSYGROUP/.test(e.message)) throw e;
    });
  }

  /** The masters' identity when last seen (redis-identity.ts). */
  private master: string | null = null;

  /**
   * A failover (Sentinel promoted a replica, a Cluster node failed over) or a restart keeps the
   * epoch (it was replicated, or persisted) but may have lost the last writes the old master
   * acknowledged: reservations, in-flight entries, settlements, usage-stream entries. Admissions
   * wait while this instance re-asserts, the same repair as after an empty restart.
   */
  checkMaster(): Promise<void> {
    if (this.gate) return this.gate;
    const gate = (async () => {
      const now = await masterIdentity(this.r);
      if (this.master === null || now === this.master) {
        this.master = now;
        return;
      }
      this.ctx.log.warn({}, "Redis master changed (failover or restart): re-asserting this instance's requests in flight");
      await this.recover();
      this.master = now; // only once repaired: a recovery cut short by another outage runs again
    })();
    this.gate = gate.finally(() => { if (this.gate === guarded) this.gate = null; });
    const guarded = this.gate;
    return guarded;
  }

  /** Checks the epoch; when Redis lost its state, admissions wait while this instance re-asserts. */
  async checkEpoch(): Promise<void> {
    if (this.gate) return this.gate;
    const cur = await this.r.get(this.k.epoch);
    if (cur !== null && cur === this.epoch) return;
    this.gate = this.recover().finally(() => { this.gate = null; });
    return this.gate;
  }

  private async recover(): Promise<void> {
    // Taken before anything awaits: no prune may judge these copies by the new stream's watermark.
    this.keepLost(this.unacked.take());
    this.ctx.log.warn({}, "Redis lost its state: re-asserting this instance's requests in flight");
    await this.r.set(this.k.epoch, randomToken(8), "NX");
    this.epoch = await this.r.get(this.k.epoch);
    this.knownKeys.clear();
    await this.ensureGroup();
    await this.r.hset(this.k.instances, this.me, Date.now());
    const byKey = new Map<string, Array<[string, Local]>>();
    for (const [id, l] of this.local) {
      const k = `${l.key.id}|${l.month}`;
      let list = byKey.get(k);
      if (!list) byKey.set(k, (list = []));
      list.push([id, l]);
    }
    // Counters are rebuilt from Postgres below: what this instance holds for it goes there first
    // (see flush()). Postgres unreachable: the rebuild fails too and the heartbeat tries again.
    if (byKey.size) await this.queue.flushQueued();
    for (const list of byKey.values()) {
      const { key, month } = list[0]![1];
      this.registerKey(key.id);
      await seed(this.ctx, key, month);
      const args: Array<string | number> = [];
      for (const [id, l] of list) args.push(id, l.value, l.nano);
      await this.r.gwReassert(counterKey(key.id, month), inflightKey(key.id), ttl(), ...args);
    }
    // Postgres unreachable: the copies stay in `lost` and the heartbeat tries again.
    await this.rewriteLost().catch((e) => this.ctx.log.warn({ err: e instanceof Error ? e.message : String(e) }, "rewriting lost usage records failed; retrying"));
  }

  /**
   * Writes the streamed records Redis lost before any drain committed them: those no Postgres row
   * holds yet are settled again first (their settlement went to the counter Redis lost; the new
   * counter, rebuilt from Postgres, cannot hold them yet), then written.
   */
  private async rewriteLost(): Promise<void> {
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
    for (const s of lost.settles) {
      const lines = settlesOf(s.settles, calls);
      if (lines) this.group(s.key, s.month).settles += lines;
    }
    await this.flush();
    for (const r of missing) this.queue.push(r);
    await this.queue.flushQueued();
    this.ctx.log.warn({ records: missing.length }, "Redis lost usage records no instance had drained: written from this instance's copies");
  }

  private keepLost(more: { records: UsageRow[]; settles: SentSettles[] }): void {
    if (!more.records.length) return;
    this.lost = this.lost ? { records: this.lost.records.concat(more.records), settles: this.lost.settles.concat(more.settles) } : more;
  }

  /** Drops the copies of batches the drain has committed (read before the epoch: see recover()). */
  private async pruneUnacked(): Promise<void> {
    if (this.unacked.size === 0) return;
    const epoch = this.epoch;
    const w = await drainedUpTo(this.r, this.k.stream, GROUP);
    if (w === null || this.gate || this.epoch !== epoch || (await this.r.get(this.k.epoch)) !== epoch) return;
    this.unacked.prune(w);
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

  private ticks = 0;
  /** Gateway instances with a recent heartbeat (this one included), as of the last reconcile. */
  liveInstances = 1;

  private async heartbeat(): Promise<void> {
    await this.r.hset(this.k.instances, this.me, Date.now());
    await this.checkEpoch();
    await this.checkMaster();
    if (this.lost) await this.rewriteLost();
    if (this.ticks++ % 2 === 0) await this.reconcile();
    // Pruning only frees memory: a failing XINFO must never cost a reconcile, and the copies
    // simply wait for the next beat.
    await this.pruneUnacked().catch(() => {});
  }

  /** Turns the in-flight entries of dead instances into `interrupted` records; one reconciler at a time. */
  async reconcile(): Promise<number> {
    const deadAfter = this.ctx.config.INSTANCE_DEAD_AFTER_SECONDS * 1000;
    const now = Date.now();
    const beats = await this.r.hgetall(this.k.instances);
    const dead = Object.entries(beats).filter(([id, t]) => id !== this.me && now - Number(t) > deadAfter).map(([id]) => id);
    this.liveInstances = Math.max(1, Object.keys(beats).length - dead.length);
    // Entries of instances not listed at all (lost with a Redis restart) are checked now and then.
    if (!dead.length && this.ticks % 30 !== 1) return 0;
    const token = randomToken(6);
    if ((await this.r.set(this.k.lock, token, "PX", 30_000, "NX")) !== "OK") return 0;
    let n = 0;
    try {
      const deadSet = new Set(dead);
      const minute = Math.floor(now / 60_000);
      for (const keyId of await this.r.smembers(this.k.keyset)) {
        const entries = await this.r.hgetall(inflightKey(keyId));
        for (const [requestId, value] of Object.entries(entries)) {
          const cut = value.lastIndexOf("|");
          let f: EntryFacts;
          try {
            f = JSON.parse(value.slice(0, cut)) as EntryFacts;
          } catch {
            continue;
          }
          const gone = deadSet.has(f.i) || (!(f.i in beats) && now - f.t > deadAfter);
          if (!gone || f.i === this.me) continue;
          const nano = Number(value.slice(cut + 1)) || 0;
          // The record first: if this reconciler dies before the write-off, the next one writes it
          // again and the unique index keeps one.
          await this.r.xadd(this.k.stream, "*", "r", JSON.stringify([interruptedRow(keyId, requestId, f, nano, now)]));
          n += await this.r.gwWriteOff(inflightKey(keyId), settledKey(keyId, minute), requestId);
        }
      }
      if (dead.length) await this.r.hdel(this.k.instances, ...dead);
    } finally {
      if ((await this.r.get(this.k.lock)) === token) await this.r.del(this.k.lock);
    }
    if (n) this.ctx.log.warn({ interrupted: n, instances: dead }, "reconciled requests of gateway instances that died");
    return n;
  }

  // ---- draining the usage stream into Postgres ----

  /** Reads new and abandoned stream entries, writes them to Postgres, acknowledges after the commit. */
  async drain(): Promise<number> {
    const q = this.queue;
    let total = 0;
    for (let round = 0; round < 20; round++) {
      const got: Array<[string, string[]]> = [];
      let full = false;
      try {
        const fresh = (await this.r.xreadgroup("GROUP", GROUP, this.me, "COUNT", DRAIN_BATCH, "STREAMS", this.k.stream, ">")) as Array<[string, Array<[string, string[]]>]> | null;
        if (fresh) got.push(...fresh[0]![1]);
        full = (fresh?.[0]?.[1].length ?? 0) >= DRAIN_BATCH;
        if (round === 0) {
          const claimed = (await this.r.xautoclaim(this.k.stream, GROUP, this.me, CLAIM_IDLE_MS, "0", "COUNT", 200)) as [string, Array<[string, string[]] | null>];
          for (const e of claimed[1]) if (e) got.push(e);
        }
      } catch (e) {
        if (e instanceof Error && /NOGROUP/.test(e.message)) await this.ensureGroup();
        else throw e;
      }
      if (!got.length) break;
      for (const [, fields] of got) {
        const i = fields.indexOf("r");
        if (i < 0) continue;
        for (const row of JSON.parse(fields[i + 1]!) as UsageRow[]) q.push(row);
      }
      // A paused queue (tests, shutdown ordering) writes later: the entries stay unacknowledged
      // and come back after CLAIM_IDLE_MS, a no-op for rows written meanwhile.
      if (q.isPaused()) break;
      await q.flushQueued();
      const ids = got.map(([id]) => id);
      await this.r.xack(this.k.stream, GROUP, ...ids);
      await this.r.xdel(this.k.stream, ...ids);
      total += ids.length;
      // Caught up: what arrived while this batch was written waits for the next tick, one INSERT
      // a tick under steady traffic instead of one per handful of records.
      if (!full) break;
    }
    return total;
  }

  async stop(): Promise<void> {
    for (const j of this.jobs) await j.stop();
    await this.flush().catch(() => {});
    await this.drain().catch((e) => this.ctx.log.error({ err: e instanceof Error ? e.message : String(e) }, "usage stream drain at shutdown failed"));
    await this.r.hdel(this.k.instances, this.me).catch(() => {});
  }
}

/** The money-call uids of a group's packed settlements ("uid\tactual\treserved\n…"). */
function settledCalls(settles: string): string[] {
  const out: string[] = [];
  for (const line of settles.split("\n")) {
    const tab = line.indexOf("\t");
    if (tab > 0) out.push(line.slice(0, tab));
  }
  return out;
}

function interruptedRow(keyId: string, uid: string, f: EntryFacts, nano: number, now: number): UsageRow {
  return {
    requestId: f.r ?? null, recordKey: `${uid}.0`, accountId: f.a, routingKeyId: keyId, endpoint: f.e, laneIndex: null, provider: f.p, model: f.md,
    status: 0, outcome: "interrupted", errorCode: "gateway_instance_lost", attempt: 0,
    promptTokens: 0, completionTokens: 0, cachedTokens: 0, cacheWriteTokens: 0,
    costUsd: fromNano(nano), priceEstimated: true, latencyMs: Math.max(0, now - f.t), ttfbMs: null, seat: f.s,
    createdAt: new Date(f.t),
  };
}

/** Starts the ledger in Redis mode (`ctx.services.ledger`; null embedded); its shutdown flushes and drains. */
export async function startLedger(ctx: Base, queue: UsageQueue): Promise<Ledger | null> {
  const kv = ctx.kv as { kind: string; client?: Cmds };
  if (kv.kind !== "redis" || !kv.client) return null;
  const ledger = new Ledger(ctx, kv.client, queue);
  await ledger.start();
  queue.setSource(async () => {
    await ledger.flush();
    await ledger.drain();
  });
  ctx.onShutdown(() => ledger.stop());
  return ledger;
}
