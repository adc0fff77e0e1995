// /blitz job items on BullMQ (Redis mode): one BullMQ job per item, id `<job id>.<index>` (a
// second add of the same item is a no-op), taken by whichever instance's worker is free. A worker
// renews its items' locks; when an instance dies, another one's stalled-job check puts its items
// back after BLITZ_JOB_LOCK_MS and the item handler decides between a rerun and `interrupted`
// (runner.ts). An item that stalls a second time fails in BullMQ and is reported by `onLost`.
import { DelayedError, Queue, Worker, type Job } from "bullmq";
import type { Redis } from "ioredis";
import type { RedisTarget } from "../../config.ts";
import { connectRedis } from "../../store/kv/connect.ts";
import { within } from "../../lib/time.ts";
import { createHash } from "node:crypto";
import type { ItemHandler, ItemRef, JobQueue } from "./queue.ts";

/**
 * Braces keep every key of the queue in one Redis Cluster slot: BullMQ's scripts touch several of
 * a queue's keys at once, which a Cluster allows only within one slot.
 */
const PREFIX = "{gw-blitz}";
const ADD_CHUNK = 1000;

export interface BullOptions {
  /** The gateway's own Redis setting: a URL, Sentinels or Cluster nodes (CONTRACT §2). */
  target: RedisTarget;
  /**
   * Names the database the jobs live in: instances share a queue only when they share the
   * database its items refer to (gateways over other databases may share the Redis).
   */
  database: string;
  concurrency: number;
  lockMs: number;
  onError(e: unknown, item: ItemRef | null): void;
  /** An item BullMQ gave up on (stalled twice): the handler never finished it. */
  onLost(item: ItemRef): void;
}

const refOf = (job: Job): ItemRef => ({ jobId: String(job.data.jobId), idx: Number(job.data.idx) });

/** The longest a shutdown waits for the worker's graceful close. */
const CLOSE_LIMIT_MS = 30_000;

export class BullJobQueue implements JobQueue {
  private readonly conn: Redis;
  private readonly queue: Queue;
  private readonly name: string;
  private worker: Worker | null = null;
  private workerConn: Redis | null = null;

  constructor(private readonly o: BullOptions) {
    // BullMQ's blocking commands need maxRetriesPerRequest: null on its connections.
    this.conn = connectRedis(o.target, "subscriber");
    this.conn.on("error", (e) => o.onError(e, null));
    this.name = `blitz-items-${createHash("sha256").update(o.database).digest("hex").slice(0, 16)}`;
    this.queue = new Queue(this.name, { connection: this.conn, prefix: PREFIX });
  }

  /** The connection for the handler's own look-ups (the in-flight ledger). */
  get redis(): Redis {
    return this.conn;
  }

  async add(jobId: string, indices: number[]): Promise<void> {
    for (let i = 0; i < indices.length; i += ADD_CHUNK) {
      await this.queue.addBulk(indices.slice(i, i + ADD_CHUNK).map((idx) => ({
        name: "item",
        data: { jobId, idx },
        opts: { jobId: `${jobId}.${idx}`, removeOnComplete: true, removeOnFail: { age: 24 * 3600 } },
      })));
    }
  }

  /**
   * True for the one instance that is to put back what the queue lost (Redis restarted empty, or a
   * failover dropped unreplicated writes): the marker this sets is missing once `everyMs` passed
   * or once Redis lost its data, and only the instance whose SET created it gets true.
   */
  async claimResync(everyMs: number): Promise<boolean> {
    return (await this.conn.set(`${PREFIX}:${this.name}:resync`, "1", "PX", everyMs, "NX")) === "OK";
  }

  start(handler: ItemHandler): void {
    if (this.worker) return;
    this.worker = new Worker(this.name, async (job, token) => {
      const v = await handler(refOf(job));
      if (v) {
        // A rate limit: back in the queue for later, not a failure.
        await job.moveToDelayed(Date.now() + v.retryAfterMs, token);
        throw new DelayedError();
      }
    }, {
      connection: (this.workerConn = connectRedis(this.o.target, "subscriber").on("error", (e) => this.o.onError(e, null))),
      prefix: PREFIX,
      concurrency: this.o.concurrency,
      lockDuration: this.o.lockMs,
      stalledInterval: Math.max(500, Math.floor(this.o.lockMs / 2)),
      maxStalledCount: 1,
      // The idle long-poll (BZPOPMIN on the queue's marker, then a moveToActive script of eight
      // commands): a new or due job wakes it at once, and a close drops its connection instead of
      // waiting it out, so only an idle instance's command rate depends on it: 16.7 → 10.3 Redis
      // commands a second at 1 s → 5 s (BullMQ's default), a gateway's stop 26 ms either way.
      drainDelay: 5,
    });
    this.worker.on("failed", (job, err) => {
      if (!job) return;
      if (/stalled/i.test(err.message)) this.o.onLost(refOf(job));
      else this.o.onError(err, refOf(job));
    });
    this.worker.on("error", (e) => this.o.onError(e, null));
  }

  private closing: Promise<void> | null = null;

  close(): Promise<void> {
    this.closing ??= this.shut();
    return this.closing;
  }

  private async shut(): Promise<void> {
    // BullMQ's connections keep an offline queue (its blocking commands need it), so with Redis
    // unreachable a graceful close waits on commands that never complete and the gateway's drain
    // would hang. Close gracefully only while both connections are up, and never for longer than
    // CLOSE_LIMIT_MS; otherwise drop them (an item in flight is redelivered like a crashed one's).
    // A gateway stopped right after it started: connections still making their first connection
    // get to finish it (BullMQ's start-up commands on them would be cut where nobody awaits them).
    await within(Promise.all([connected(this.conn), this.workerConn && connected(this.workerConn)]), CLOSE_LIMIT_MS);
    const up = this.conn.status === "ready" && (!this.workerConn || this.workerConn.status === "ready");
    const graceful = up
      ? (async () => {
          // A gateway stopped right after it started: let BullMQ's own start-up commands answer
          // first, or quitting the connections rejects them where nobody awaits them.
          await this.queue.waitUntilReady();
          await this.worker?.waitUntilReady();
          await this.worker?.close();
          await this.queue.close();
          return true;
        })().catch(() => false)
      : Promise.resolve(false);
    if ((await within(graceful, CLOSE_LIMIT_MS)) === true) {
      await this.workerConn?.quit().catch(() => {});
      await this.conn.quit().catch(() => {});
      return;
    }
    void this.worker?.close(true).catch(() => {});
    void this.queue.close().catch(() => {});
    this.workerConn?.disconnect();
    this.conn.disconnect();
  }
}

/** Resolves once a connection making its first connection is ready or has failed; at once otherwise. */
function connected(c: Redis): Promise<void> {
  if (c.status !== "wait" && c.status !== "connecting" && c.status !== "connect") return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      c.off("ready", done);
      c.off("error", done);
      c.off("end", done);
      resolve();
    };
    c.once("ready", done);
    c.once("error", done);
    c.once("end", done);
  });
}
