// This instance's copy of the usage records it put in the usage stream, kept until a drain has
// committed them to Postgres (CONTRACT §7: a record is lost only when the gateway process and
// Redis lose it together). A drain acknowledges an entry only after its rows are committed, so
// every entry below the stream's acknowledged watermark is in Postgres and its copy is dropped;
// the heartbeat reads the watermark once a second. When Redis restarts without persistence, the
// stream is gone: the ledger writes the copies no Postgres row holds yet (and settles them again,
// since their settlement was applied to the counter Redis lost).
import type { Cmds } from "../../store/kv/redis.ts";
import type { UsageRow } from "../../relay/usage-queue.ts";
import type { SentSettles, Settlement } from "./types.ts";

interface Sent {
  /** The stream entry id ("<ms>-<seq>") Redis gave the batch. */
  id: string;
  records: UsageRow[];
  settles: SentSettles[];
}

/** Beyond this many rows (the drain stalled: Postgres down for long) the oldest copies go. */
const MAX_ROWS = 200_000;

/** A stream position the drain has committed up to: ids ≤ `id` (or < `id` when `before`). */
export interface Watermark {
  id: string;
  before: boolean;
}

/** "<ms>-<seq>" ordering (both parts can pass 2^53 only in theory; ms is a Unix time). */
export function compareStreamIds(a: string, b: string): number {
  const i = a.indexOf("-");
  const j = b.indexOf("-");
  const ms = Number(a.slice(0, i)) - Number(b.slice(0, j));
  return ms !== 0 ? ms : Number(a.slice(i + 1)) - Number(b.slice(j + 1));
}

/**
 * How far the consumer group has committed: everything below its oldest pending (delivered, not
 * yet acknowledged) entry, or everything delivered when nothing is pending. Null without a group.
 */
export async function drainedUpTo(r: Cmds, stream: string, group: string): Promise<Watermark | null> {
  const [info, pending] = await Promise.all([
    r.xinfo("GROUPS", stream) as Promise<unknown[][]>,
    r.xpending(stream, group) as Promise<[number, string | null, string | null, unknown]>,
  ]);
  let delivered: string | null = null;
  for (const g of info) {
    const f = new Map<string, unknown>();
    for (let i = 0; i + 1 < g.length; i += 2) f.set(String(g[i]), g[i + 1]);
    if (f.get("name") === group) delivered = String(f.get("last-delivered-id"));
  }
  if (delivered === null) return null;
  return Number(pending[0]) > 0 && pending[1] ? { id: pending[1], before: true } : { id: delivered, before: false };
}

export class UnackedRecords {
  private sent: Sent[] = [];
  private rows = 0;

  constructor(private onDrop: (rows: number) => void) {}

  get size(): number {
    return this.rows;
  }

  /** A batch Redis accepted as entry `id` (entries of one connection resolve in id order). */
  keep(id: string, records: UsageRow[], settles: SentSettles[]): void {
    this.sent.push({ id, records, settles });
    this.rows += records.length;
    if (this.rows <= MAX_ROWS) return;
    let drop = 0;
    let rows = 0;
    while (this.rows - rows > MAX_ROWS && drop < this.sent.length) rows += this.sent[drop++]!.records.length;
    this.sent = this.sent.slice(drop);
    this.rows -= rows;
    this.onDrop(rows);
  }

  /** Forgets the batches the drain has committed. */
  prune(w: Watermark): void {
    let n = 0;
    let rows = 0;
    for (; n < this.sent.length; n++) {
      const c = compareStreamIds(this.sent[n]!.id, w.id);
      if (c > 0 || (c === 0 && w.before)) break;
      rows += this.sent[n]!.records.length;
    }
    if (n === 0) return;
    this.sent = this.sent.slice(n);
    this.rows -= rows;
  }

  /** Everything still kept (Redis lost the stream): the caller writes what Postgres lacks. */
  take(): { records: UsageRow[]; settles: SentSettles[] } {
    const sent = this.sent;
    this.sent = [];
    this.rows = 0;
    return { records: sent.flatMap((s) => s.records), settles: sent.flatMap((s) => s.settles) };
  }
}

/** The money call a record belongs to (record keys are "<uid>.<attempt>"). */
export function callOfRecord(recordKey: string): string {
  const dot = recordKey.lastIndexOf(".");
  return dot > 0 ? recordKey.slice(0, dot) : recordKey;
}

/** The settlements whose call is in `calls`. */
export function settlesOf(settles: readonly Settlement[], calls: Set<string>): Settlement[] {
  return settles.filter((s) => calls.has(s.id));
}
