// The durable in-flight ledger (CONTRACT §7: a request that reached an upstream has exactly one
// usage record even if the gateway is SIGKILLed mid-request or Redis restarts empty). Redis mode
// only; the embedded mode (one process, in-process KV) keeps usage in its in-memory queue, written
// to PGlite every second and drained on SIGTERM (README "What survives what").
//
//   admission   the reservation script also writes `gw:{k:<key>}:inflight[<request id>]` (same
//               round trip; keys without a budget, and requests admitted from a budget lease, get
//               theirs in the per-turn batch: writes.ts);
//   attempts    every finished attempt's usage record goes to the usage stream (writes.ts);
//   settlement  removes the entry and applies real − reserved to the counter (writes.ts); one
//               that finds the counter missing goes into the month's adding set, which every
//               rebuild of the counter, on any instance, leaves out (store/kv/ledger-scripts.ts);
//   draining    any instance moves the stream into Postgres (drain.ts);
//   heartbeat   `instances[<instance>] = now` every second;
//   reconciler  turns a dead instance's entries into `interrupted` records (reconcile.ts);
//   epoch       Redis lost its state: admissions wait while this instance re-asserts, then until
//               every live instance has (the recovery barrier, on Redis's clock: epoch.ts).
import type { Base } from "../../base.ts";
import { intervalJob, type Job } from "../../jobs/job.ts";
import { fleetNamespace } from "../../store/kv/index.ts";
import type { Cmds } from "../../store/kv/redis.ts";
import type { LedgerEntry } from "../../store/kv/types.ts";
import type { UsageQueue, UsageRow } from "../../relay/usage-queue.ts";
import type { BudgetedKey } from "../counters.ts";
import { StreamDrain } from "./drain.ts";
import { Epoch, EPOCH_CHECK_MS } from "./epoch.ts";
import { FactsCache } from "./facts.ts";
import { Reconciler } from "./reconcile.ts";
import type { FactsJson, LedgerKeys } from "./types.ts";
import { LedgerWrites } from "./writes.ts";

export type { EntryFacts, FactsJson } from "./types.ts";

/** The heartbeat checks the epoch: the recovery barrier is counted in these (epoch.ts). */
const HEARTBEAT_MS = EPOCH_CHECK_MS;
/**
 * A drain costs two Postgres statements and four Redis commands whatever it carries, and stops
 * once the stream is caught up. (A slower drain once seemed to lose an outage's spend from a
 * rebuilt counter; the cause was a rebuild reading Postgres before this instance's queued records
 * reached it, fixed in LedgerWrites.flush() and Epoch.recover().)
 */
const DRAIN_MS = 200;
/**
 * After this many drains in a row found the stream empty, and while this instance has no entry of
 * its own waiting, the stream is read every QUIET_EVERY-th tick (once a second): an idle instance
 * sent five reads a second for nothing, and a fleet pays that per instance. An instance that
 * streams records drains them at the full pace; another instance's entries wait at most a second.
 */
const QUIET_AFTER = 5;
const QUIET_EVERY = 5;

export class Ledger {
  readonly jobs: Job[];
  /**
   * The ledger's shared keys, named per deployment (the Postgres the records go to): gateways that
   * share a Redis but not a database never drain or reconcile each other's records.
   */
  readonly k: LedgerKeys;
  private writes: LedgerWrites;
  private stream: StreamDrain;
  private epoch: Epoch;
  private reconciler: Reconciler;
  private factsCache: FactsCache;
  private ticks = 0;
  private emptyDrains = 0;
  private skipped = 0;

  constructor(private ctx: Base, private r: Cmds, private queue: UsageQueue) {
    const ns = fleetNamespace(ctx.config);
    this.k = { stream: `${ns}:usage`, instances: `${ns}:instances`, keyset: `${ns}:ledger-keys`, epoch: `${ns}:epoch`, lock: `${ns}:reconcile-lock` };
    this.writes = new LedgerWrites(ctx, r, queue, this.k);
    this.stream = new StreamDrain(ctx, r, queue, this.k);
    this.epoch = new Epoch(ctx, r, queue, this.k, this.writes, this.stream);
    // A counter rebuild after a lost counter first checks the epoch: when Redis lost its state it
    // waits, like admissions, until every live instance has re-asserted (the recovery barrier).
    this.writes.recovered = () => this.epoch.checkEpoch();
    this.reconciler = new Reconciler(ctx, r, this.k);
    this.factsCache = new FactsCache(ctx.instanceId);
    this.jobs = [
      intervalJob(ctx, "ledger-heartbeat", HEARTBEAT_MS, () => this.heartbeat()),
      intervalJob(ctx, "usage-stream-drain", DRAIN_MS, async () => {
        if (this.queue.held()) return;
        if (this.emptyDrains >= QUIET_AFTER && this.writes.unacked.size === 0 && ++this.skipped < QUIET_EVERY) return;
        this.skipped = 0;
        this.emptyDrains = (await this.drain()) > 0 ? 0 : this.emptyDrains + 1;
      }),
    ];
  }

  /** Set while re-asserting after a Redis restart: admissions wait for it. */
  get gate(): Promise<void> | null {
    return this.epoch.gate;
  }

  /** Rows this instance streamed that no drain has committed yet (its copies). */
  get unackedRecords(): number {
    return this.writes.unacked.size;
  }

  /** Gateway instances with a recent heartbeat (this one included), as of the last reconcile. */
  get liveInstances(): number {
    return this.reconciler.liveInstances;
  }

  /** The entry's facts (EntryFacts, in their stored form). */
  facts(key: { id: string; accountId: string; lanes: Array<{ provider: string }> }, endpoint: string, model: string | null, month: string, requestId: string | null = null, extra = ""): FactsJson {
    return this.factsCache.facts(key, endpoint, model, month, requestId, extra);
  }

  admission(keyId: string, requestId: string, facts: FactsJson): LedgerEntry {
    return this.writes.admission(keyId, requestId, facts);
  }

  admitted(key: BudgetedKey, requestId: string, month: string, facts: FactsJson, nano: number): void {
    this.writes.admitted(key, requestId, month, facts, nano);
  }

  enter(key: BudgetedKey, requestId: string, month: string, facts: FactsJson, nano = 0): void {
    this.writes.enter(key, requestId, month, facts, nano);
  }

  /** A request admitted from a budget lease: its own entry, sent with this turn's entries (writes.ts). */
  enterLeased(key: BudgetedKey, requestId: string, month: string, facts: FactsJson): void {
    this.writes.enterLeased(key, requestId, month, facts);
  }

  /** Sends the in-flight entries still waiting for the end of this turn, when there are any. */
  sendEntries(): void {
    if (this.writes.entriesPending) void this.writes.flushEntries();
  }

  settle(key: BudgetedKey, requestId: string, month: string, reservedNano: number, actualNano: number): void {
    this.writes.settle(key, requestId, month, reservedNano, actualNano);
  }

  /** `later`: a request admitted from a budget lease (written with the lease's batch). */
  record(row: UsageRow, later = false): void {
    this.writes.record(row, later);
  }

  settleLeased(key: BudgetedKey, month: string, lease: string, requestId: string, reservedNano: number, actualNano: number): void {
    this.writes.settleLeased(key, month, lease, requestId, reservedNano, actualNano);
  }

  closeLease(key: BudgetedKey, month: string, lease: string): void {
    this.writes.closeLease(key, month, lease);
  }

  /** Called when Redis lost its state, before this instance re-asserts its entries. */
  set onLost(fn: () => void) {
    this.epoch.onLost = fn;
  }

  flush(): Promise<void> {
    return this.writes.flush();
  }

  checkEpoch(): Promise<void> {
    return this.epoch.checkEpoch();
  }

  instanceState(instance: string): Promise<"alive" | "dead" | "gone"> {
    return this.reconciler.instanceState(instance);
  }

  drain(): Promise<number> {
    return this.stream.drain();
  }

  async start(): Promise<void> {
    // Back from an outage: settlements kept while Redis was away go out first, ahead of anything
    // this instance sends on the new connection (one connection runs commands in order), so a
    // counter Redis lost is rebuilt by them (leaving their records out of the rebuild) and not by
    // a reader that would find their records already in Postgres and then get them added again.
    this.r.on("ready", () => {
      if (this.writes.pending) void this.writes.flush();
      // Set before this turn ends: no admission on the new connection runs ahead of the check.
      if (!this.epoch.gate) void this.epoch.checkMaster().catch(() => {});
    });
    await this.epoch.start();
    await this.reconciler.beat();
    for (const j of this.jobs) j.start();
  }

  private async heartbeat(): Promise<void> {
    await this.reconciler.beat();
    await this.epoch.checkEpoch();
    await this.epoch.checkMaster();
    if (this.epoch.hasLost) await this.epoch.rewriteLost();
    if (this.ticks++ % 2 === 0) await this.reconcile();
    // Pruning only frees memory: a failing XINFO must never cost a reconcile, and the copies
    // simply wait for the next time. Every fifth beat: its three commands are most of what a busy
    // instance's ledger sends besides its batches.
    if (this.ticks % 5 === 0) await this.epoch.pruneUnacked().catch(() => {});
  }

  /** Turns the in-flight entries of dead instances into `interrupted` records; one reconciler at a time. */
  reconcile(): Promise<number> {
    // Entries of instances not listed at all (lost with a Redis restart) are checked now and then.
    return this.reconciler.reconcile(this.ticks % 30 === 1);
  }

  async stop(): Promise<void> {
    for (const j of this.jobs) await j.stop();
    await this.writes.flush().catch(() => {});
    await this.drain().catch((e) => this.ctx.log.error({ err: e instanceof Error ? e.message : String(e) }, "usage stream drain at shutdown failed"));
    await this.r.hdel(this.k.instances, this.ctx.instanceId).catch(() => {});
  }
}

/**
 * Starts the ledger in Redis mode (`ctx.services.ledger`; null embedded). It is the usage
 * pipeline's drain stage (usage-pipeline.ts), which flushes, drains and stops it.
 */
export async function startLedger(ctx: Base, queue: UsageQueue): Promise<Ledger | null> {
  const kv = ctx.kv as { kind: string; client?: Cmds };
  if (kv.kind !== "redis" || !kv.client) return null;
  const ledger = new Ledger(ctx, kv.client, queue);
  await ledger.start();
  return ledger;
}
