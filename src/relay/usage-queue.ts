// Usage records (one per attempt, CONTRACT §7) and routing keys' last_used_at, written off the
// hot path: requests push into memory, and this queue writes them to Postgres, the last stage of
// the usage pipeline (usage-pipeline.ts: its timed flush, its hold and its shutdown drain); a
// batch that fills is written at once. A write that cannot reach the database keeps its rows for
// the next one. A row the database refuses must not block the rows behind it forever: rows are
// sanitised when queued, and a batch refused for its data is split until the bad row is alone,
// then that row alone is dropped with a log line.
import { getTableColumns, sql } from "drizzle-orm";
import type { Base } from "../base.ts";
import { usageRecords } from "../store/db/schema/index.ts";
import { createRefusalCounts, type RefusalKind } from "./refusal-counts.ts";

/**
 * One usage record as it travels (the usage stream, the queue, the INSERT's JSON): its time is an
 * ISO string, never a Date. A Date has a toJSON, which throws JSON.stringify off its fast path for
 * the whole batch: 4 µs a record instead of 1 (bench/PROFILE.md).
 */
export type UsageRow = Omit<typeof usageRecords.$inferInsert, "createdAt"> & { createdAt?: string };

/** Rows that trigger a flush before the interval, and the size of one INSERT. */
const BATCH_ROWS = 500;
/** Streamed records per INSERT: their texts are joined, not serialised, so batches can be larger. */
const TEXT_BATCH_ROWS = 5_000;
/** Beyond this (a long database outage) the oldest rows are dropped, loudly, to protect memory. */
const MAX_PENDING = 200_000;

// One INSERT … SELECT FROM json_to_recordset($1) per batch: the whole batch is one JSON parameter
// (serialised natively by JSON.stringify, parsed by Postgres), instead of a parameter per value
// built by the query builder, which cost more CPU than the rest of a request.
const COLUMNS: Array<[column: string, key: keyof UsageRow, type: string, dflt?: string]> = [
  ["request_id", "requestId", "text"],
  ["account_id", "accountId", "text"],
  ["routing_key_id", "routingKeyId", "text"],
  ["attempt", "attempt", "integer", "0"],
  ["record_key", "recordKey", "text"],
  ["endpoint", "endpoint", "text"],
  ["lane_index", "laneIndex", "integer"],
  ["provider", "provider", "text"],
  ["model", "model", "text"],
  ["status", "status", "integer"],
  ["outcome", "outcome", "text"],
  ["error_code", "errorCode", "text"],
  ["prompt_tokens", "promptTokens", "integer", "0"],
  ["completion_tokens", "completionTokens", "integer", "0"],
  ["cached_tokens", "cachedTokens", "integer", "0"],
  ["cache_write_tokens", "cacheWriteTokens", "integer", "0"],
  ["cost_usd", "costUsd", "double precision", "0"],
  ["price_estimated", "priceEstimated", "boolean", "false"],
  ["price_source", "priceSource", "text"],
  ["saved_usd", "savedUsd", "double precision", "0"],
  ["latency_ms", "latencyMs", "integer", "0"],
  ["ttfb_ms", "ttfbMs", "integer"],
  ["seat", "seat", "boolean", "false"],
  ["adapted", "adapted", "text"],
  ["affinity", "affinity", "text"],
  ["tags", "tags", "text[]"],
  ["created_at", "createdAt", "timestamptz", "now()"],
];
// A column added to the schema but not listed above would silently never be written: refuse to boot.
const missing = Object.keys(getTableColumns(usageRecords)).filter((k) => k !== "id" && !COLUMNS.some(([, key]) => key === k));
if (missing.length) throw new Error(`usage-queue.ts: list the usage_records column(s) ${missing.join(", ")} in COLUMNS`);
const INSERT_HEAD = sql.raw(`insert into usage_records (${COLUMNS.map(([c]) => c).join(", ")}) select ${COLUMNS.map(([, k, , d]) => (d ? `coalesce(x."${k}", ${d})` : `x."${k}"`)).join(", ")} from json_to_recordset(`);
// A row already written (same record key: a redelivery from the usage stream) is skipped.
const INSERT_TAIL = sql.raw(`::json) as x(${COLUMNS.map(([, k, t]) => `"${k}" ${t}`).join(", ")}) on conflict do nothing`);

const INT4_MAX = 2_147_483_647;
/** Longest string kept per text column; the rest is cut (ids are short; model names come from clients). */
const MAX_CHARS: Partial<Record<keyof UsageRow, number>> = {
  requestId: 128, accountId: 64, routingKeyId: 64, endpoint: 32, provider: 64, model: 200, outcome: 32, errorCode: 200, adapted: 1000, affinity: 16, priceSource: 16,
};

/** A count for an integer column: whole, non-negative, within int4 (upstreams can report nonsense). */
function int4(n: unknown): number {
  if (typeof n !== "number" || !Number.isFinite(n) || n <= 0) return 0;
  return n >= INT4_MAX ? INT4_MAX : Math.round(n);
}

/**
 * Makes a row one Postgres accepts, in place: no NUL characters (text cannot hold them), strings
 * capped, integers within int4. Cheap on the usual row: each check is a comparison.
 */
export function sanitizeUsageRow(row: UsageRow): UsageRow {
  for (const k in MAX_CHARS) {
    const key = k as keyof UsageRow;
    const v = row[key];
    if (typeof v !== "string") continue;
    let t = v.includes("\0") ? v.replaceAll("\0", "") : v;
    const max = MAX_CHARS[key]!;
    if (t.length > max) t = t.slice(0, max);
    if (t !== v) (row as Record<string, unknown>)[key] = t;
  }
  row.promptTokens = int4(row.promptTokens);
  row.completionTokens = int4(row.completionTokens);
  row.cachedTokens = int4(row.cachedTokens);
  row.cacheWriteTokens = int4(row.cacheWriteTokens);
  row.latencyMs = int4(row.latencyMs);
  row.status = int4(row.status);
  if (row.ttfbMs != null) row.ttfbMs = int4(row.ttfbMs);
  if (row.laneIndex != null) row.laneIndex = int4(row.laneIndex);
  if (row.costUsd != null && !Number.isFinite(row.costUsd)) row.costUsd = 0;
  // Tags were checked when the request came (relay/tags.ts); a row from elsewhere holds a list or nothing.
  if (row.tags != null && !(Array.isArray(row.tags) && row.tags.length > 0)) row.tags = null;
  // The time is part of the record's unique key (the partition key): a redelivered record must
  // carry the time it was first queued with, not the time of the write that finally took it.
  if (typeof row.createdAt !== "string") row.createdAt = new Date().toISOString();
  return row;
}

/**
 * SQLSTATE of a database error (drizzle wraps the driver's error as `cause`), or null for a
 * failure without one (connection refused or closed, timeout).
 */
function sqlState(e: unknown): string | null {
  for (let x: unknown = e, i = 0; x && typeof x === "object" && i < 4; x = (x as { cause?: unknown }).cause, i++) {
    const code = (x as { code?: unknown }).code;
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return code;
  }
  return null;
}

/**
 * Refused for what a row holds (class 22 data exception, class 23 integrity violation): another
 * attempt would fail the same way. Anything else (connection, shutdown, resources) is retried.
 */
function rowRefused(e: unknown): boolean {
  const s = sqlState(e);
  return s !== null && (s.startsWith("22") || s.startsWith("23"));
}

function errorText(e: unknown): string {
  let x: unknown = e;
  while (x && typeof x === "object" && (x as { cause?: unknown }).cause) x = (x as { cause?: unknown }).cause;
  return (x instanceof Error ? x.message : String(x)).slice(0, 200);
}

export interface UsageQueue {
  push(row: UsageRow): void;
  /**
   * A usage stream entry's records as the JSON array text they were streamed in, sanitised before
   * they were (LedgerWrites.record): written as they are, never parsed and serialised again. A
   * text the database refuses for its data is parsed then, and its rows go the row-by-row way.
   */
  pushJson(text: string): void;
  /** Counts a refused request (402 budget, 429 rate limit) into the rollup with the next flush. */
  refusal(accountId: string, routingKeyId: string | null, kind: RefusalKind): void;
  /** Marks a routing key used now; written with the next flush (one UPDATE per flush, not per request). */
  touchKey(keyId: string): void;
  /**
   * Writes what is in this queue now, after the pending settlements (the `settlements` it was
   * built with): the usage pipeline's write stage, also called by the ledger's drain and counter
   * rebuilds. Records still on their way (the usage stream) wait: UsagePipeline.flush() has all.
   */
  flushQueued(): Promise<void>;
  depth(): number;
  /**
   * True while the usage pipeline is held (UsagePipeline.hold()): timed and size-triggered writes
   * wait, and the ledger's drain leaves its entries in the stream. Explicit writes still go.
   */
  held(): boolean;
  /** Holds the writes until the returned function is called; UsagePipeline.hold() is the way in. */
  hold(): () => void;
}

/** The settlements a write sends first: a counter rebuilt from Postgres must never already hold a record whose settlement has yet to add it. */
export interface PendingSettlements {
  flush(): Promise<void>;
}

/** Records in a streamed text: every record has a record key. */
function countRecords(text: string): number {
  let n = 0;
  for (let i = text.indexOf('"recordKey":'); i >= 0; i = text.indexOf('"recordKey":', i + 12)) n++;
  return n;
}

interface StreamedText {
  text: string;
  rows: number;
}

/** One JSON array of the records of several texts, each `[…]` as JSON.stringify wrote it. */
function joined(group: StreamedText[]): string {
  if (group.length === 1) return group[0]!.text;
  return `[${group.map((g) => g.text.slice(1, -1)).join(",")}]`;
}

export function createUsageQueue(ctx: Base, settlements: PendingSettlements): UsageQueue {
  let rows: UsageRow[] = [];
  let texts: StreamedText[] = [];
  let textRows = 0;
  let touched = new Map<string, number>();
  /** Holds not yet released (UsagePipeline.hold()). */
  let holds = 0;
  let flushing: Promise<void> | null = null;
  let sizeFlushScheduled = false;
  const refusals = createRefusalCounts();

  const insert = (part: UsageRow[]) => ctx.db.execute(sql`${INSERT_HEAD}${JSON.stringify(part)}${INSERT_TAIL}`);

  /**
   * Writes the streamed texts, a few thousand records an INSERT. Returns the rows of texts the
   * database refused for their data, parsed, for the row-by-row way. A failure of any other kind
   * (connection, shutdown) keeps the texts not written for the next write.
   */
  async function writeTexts(): Promise<UsageRow[]> {
    const pending = texts;
    texts = [];
    textRows = 0;
    const refused: UsageRow[] = [];
    let i = 0;
    try {
      while (i < pending.length) {
        let j = i + 1;
        for (let n = pending[i]!.rows; j < pending.length && n + pending[j]!.rows <= TEXT_BATCH_ROWS; j++) n += pending[j]!.rows;
        const group = pending.slice(i, j);
        try {
          await ctx.db.execute(sql`${INSERT_HEAD}${joined(group)}${INSERT_TAIL}`);
        } catch (e) {
          if (!rowRefused(e)) throw e;
          for (const g of group) for (const row of recordsOf(g.text)) refused.push(sanitizeUsageRow(row));
        }
        i = j;
      }
    } catch (e) {
      texts = pending.slice(i).concat(texts);
      textRows = texts.reduce((a, t) => a + t.rows, 0);
      throw e;
    }
    return refused;
  }

  /** The records of a streamed text, parsed; a text that is no JSON array of them is dropped, loudly. */
  function recordsOf(text: string): UsageRow[] {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {}
    if (Array.isArray(parsed)) return parsed as UsageRow[];
    ctx.log.error({ chars: text.length }, "usage stream entry is not a JSON array of records: dropped");
    return [];
  }

  function push(row: UsageRow): void {
    rows.push(sanitizeUsageRow(row));
    if (rows.length >= BATCH_ROWS && holds === 0 && !sizeFlushScheduled) {
      sizeFlushScheduled = true;
      setTimeout(() => {
        sizeFlushScheduled = false;
        void flush().catch((e) => ctx.log.error({ err: e instanceof Error ? e.message : String(e) }, "usage flush failed"));
      }, 0);
    }
  }

  async function writeOnce(): Promise<void> {
    if (texts.length) {
      const refused = await writeTexts();
      if (refused.length) rows = refused.concat(rows);
    }
    const batch = rows;
    const keys = touched;
    rows = [];
    touched = new Map();
    // Rows of `batch` before this index are written or dropped; a failure re-queues only the rest.
    let settled = 0;
    // Writes batch[lo, hi) in order. Refused for its data: halves until the bad row is alone and
    // drops just that one (log2 extra statements per bad row, none when all is well).
    const write = async (lo: number, hi: number): Promise<void> => {
      try {
        await insert(batch.slice(lo, hi));
      } catch (e) {
        if (!rowRefused(e)) throw e;
        if (hi - lo === 1) {
          ctx.log.error({ requestId: batch[lo]!.requestId, reason: `${sqlState(e)}: ${errorText(e)}` }, "usage record refused by the database: dropped");
        } else {
          const mid = lo + ((hi - lo) >> 1);
          await write(lo, mid);
          await write(mid, hi);
        }
      }
      settled = hi;
    };
    try {
      for (let i = 0; i < batch.length; i += BATCH_ROWS) await write(i, Math.min(i + BATCH_ROWS, batch.length));
    } catch (e) {
      rows = settled ? batch.slice(settled).concat(rows) : batch.concat(rows);
      if (rows.length > MAX_PENDING) {
        const dropped = rows.length - MAX_PENDING;
        rows = rows.slice(dropped);
        ctx.log.error({ dropped }, "usage queue over capacity: dropped the oldest usage records");
      }
      for (const [k, t] of keys) if ((touched.get(k) ?? 0) < t) touched.set(k, t);
      throw e;
    }
    if (keys.size) {
      try {
        const values = sql.join([...keys].map(([id, t]) => sql`(${id}, ${new Date(t).toISOString()}::timestamptz)`), sql`, `);
        await ctx.db.execute(sql`update routing_keys set last_used_at = v.t from (values ${values}) as v(id, t)
          where routing_keys.id = v.id and (routing_keys.last_used_at is null or routing_keys.last_used_at < v.t)`);
      } catch (e) {
        for (const [k, t] of keys) if ((touched.get(k) ?? 0) < t) touched.set(k, t);
        throw e;
      }
    }
    await refusals.write(ctx.db);
  }

  async function flush(): Promise<void> {
    // One writer at a time; whoever comes while one runs waits for it, then writes what is left.
    while (flushing) await flushing;
    if (rows.length === 0 && texts.length === 0 && touched.size === 0 && refusals.pending() === 0) return;
    flushing = settlements.flush().catch(() => {}).then(writeOnce).finally(() => { flushing = null; });
    await flushing;
  }

  return {
    push,
    pushJson(text) {
      // Not an array as the ledger writes them, or records without a record key (none of the
      // gateway's own, but they cannot be counted from the text): read the long way.
      const n = text.charCodeAt(0) === 91 && text.charCodeAt(text.length - 1) === 93 ? countRecords(text) : 0;
      if (n === 0) {
        if (text !== "[]") for (const row of recordsOf(text)) push(row);
        return;
      }
      texts.push({ text, rows: n });
      textRows += n;
      while (textRows > MAX_PENDING && texts.length > 1) {
        const dropped = texts.shift()!;
        textRows -= dropped.rows;
        ctx.log.error({ dropped: dropped.rows }, "usage queue over capacity: dropped the oldest usage records");
      }
    },
    refusal(accountId, routingKeyId, kind) {
      refusals.add(accountId, routingKeyId, kind);
    },
    touchKey(keyId) {
      touched.set(keyId, Date.now());
    },
    flushQueued: flush,
    depth: () => rows.length + textRows,
    held: () => holds > 0,
    hold() {
      holds++;
      let released = false;
      return () => {
        if (released) return;
        released = true;
        holds--;
      };
    },
  };
}
