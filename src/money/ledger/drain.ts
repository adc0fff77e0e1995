// Draining the usage stream into Postgres: any instance reads `gw:usage` with XREADGROUP, inserts
// the rows (a unique index on record key makes a redelivery a no-op), then acknowledges. An entry
// delivered to an instance that never acknowledged it is taken over after CLAIM_IDLE_MS.
import type { Base } from "../../base.ts";
import type { Cmds } from "../../store/kv/redis.ts";
import type { UsageQueue } from "../../relay/usage-queue.ts";
import { GROUP, type LedgerKeys } from "./types.ts";

/**
 * Stream entries read per round at most; a tick reads on while rounds come back full. An entry is
 * one flush's records: a few per event-loop turn for most keys, up to MAX_BATCH (writes.ts) for a
 * hot leased key's batch. A round asks for as many entries as hold about ROUND_ROWS rows by the
 * size of the entries seen so far, so one reply stays under a megabyte (a reply that takes long to
 * arrive on a busy instance looks like a frozen Redis to the reply watchdog) and a backlog drains
 * round by round, each acknowledged after its commit.
 */
const DRAIN_BATCH = 200;
const ROUND_ROWS = 2_000;
/** A stream entry delivered to a consumer that did not acknowledge it this long is taken over. */
const CLAIM_IDLE_MS = 15_000;
/**
 * How often an instance looks for such entries. On every drain tick (200 ms) this scan was 5 of an
 * idle instance's 23 Redis commands a second, for entries that can only be taken over 15 s after
 * their delivery: an entry whose consumer died is written within about 20 s this way.
 */
const CLAIM_EVERY_MS = 5_000;

export class StreamDrain {
  /** Rows per stream entry, a moving average of what the drain has read. */
  private rowsPerEntry = 1;
  private lastClaim = 0;
  /** The drain under way, if any. */
  private running: Promise<number> | null = null;

  constructor(private ctx: Base, private r: Cmds, private queue: UsageQueue, private k: LedgerKeys) {}

  async ensureGroup(): Promise<void> {
    await this.r.xgroup("CREATE", this.k.stream, GROUP, "0", "MKSTREAM").catch((e: Error) => {
      if (!/BUSYGROUP/.test(e.message)) throw e;
    });
  }

  /** Whether `e` is the connection being down or reconnecting rather than a refused command. */
  private away(e: unknown): boolean {
    return this.r.status !== "ready" || (e instanceof Error && /Stream isn't writeable|Connection is closed/.test(e.message));
  }

  /**
   * Reads new and abandoned stream entries, writes them to Postgres, acknowledges after the commit.
   * One drain at a time: a caller that drains to see the stream in Postgres (the usage pipeline's
   * flush) waits for a periodic drain that has already read entries and not yet written them,
   * instead of finding the stream empty and returning before those rows are committed.
   */
  async drain(): Promise<number> {
    while (this.running) await this.running.catch(() => 0);
    const run = this.drainOnce();
    this.running = run;
    try {
      return await run;
    } finally {
      if (this.running === run) this.running = null;
    }
  }

  private async drainOnce(): Promise<number> {
    const q = this.queue;
    const me = this.ctx.instanceId;
    let total = 0;
    for (let round = 0; round < 20; round++) {
      const got: Array<[string, string[]]> = [];
      let full = false;
      try {
        const count = Math.max(1, Math.min(DRAIN_BATCH, Math.floor(ROUND_ROWS / this.rowsPerEntry)));
        const fresh = (await this.r.xreadgroup("GROUP", GROUP, me, "COUNT", count, "STREAMS", this.k.stream, ">")) as Array<[string, Array<[string, string[]]>]> | null;
        if (fresh) got.push(...fresh[0]![1]);
        full = (fresh?.[0]?.[1].length ?? 0) >= count;
        if (round === 0 && Date.now() - this.lastClaim >= CLAIM_EVERY_MS) {
          this.lastClaim = Date.now();
          const claimed = (await this.r.xautoclaim(this.k.stream, GROUP, me, CLAIM_IDLE_MS, "0", "COUNT", 200)) as [string, Array<[string, string[]] | null>];
          for (const e of claimed[1]) if (e) got.push(e);
        }
      } catch (e) {
        if (e instanceof Error && /NOGROUP/.test(e.message)) await this.ensureGroup();
        // Redis away or reconnecting: the connection has no offline queue, so a read sent now
        // fails at once. The entries wait in the stream for the next drain, and a caller flushing
        // the usage pipeline (its flush() pulls the stream first) still gets its own rows written.
        else if (this.away(e)) return total;
        else throw e;
      }
      if (!got.length) break;
      const before = q.depth();
      for (const [, fields] of got) {
        const i = fields.indexOf("r");
        // As streamed (sanitised JSON text): into the INSERT without a parse and a serialisation.
        if (i >= 0) q.pushJson(fields[i + 1]!);
      }
      const rows = q.depth() - before;
      this.rowsPerEntry = 0.5 * this.rowsPerEntry + 0.5 * Math.max(1, rows / got.length);
      // A held pipeline (tests) writes later: the entries stay unacknowledged and come back
      // after CLAIM_IDLE_MS, a no-op for rows written meanwhile.
      if (q.held()) break;
      await q.flushQueued();
      const ids = got.map(([id]) => id);
      try {
        // Sent together (one round trip): XDEL only drops what XACK just acknowledged.
        await Promise.all([this.r.xack(this.k.stream, GROUP, ...ids), this.r.xdel(this.k.stream, ...ids)]);
      } catch (e) {
        // The rows are in Postgres; unacknowledged, the entries come back later as no-ops.
        if (this.away(e)) return total + ids.length;
        throw e;
      }
      total += ids.length;
      // Caught up: what arrived while this batch was written waits for the next tick, one INSERT
      // a tick under steady traffic instead of one per handful of records.
      if (!full) break;
    }
    return total;
  }
}
