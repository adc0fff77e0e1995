// The month partitions of usage_records: each one is created ahead of its month (so no insert
// ever waits on DDL or lands in the default partition), and with USAGE_RETENTION_MONTHS the raw
// partitions wholly older than that are dropped. The daily rollup is not touched: reports and
// counter rebuilds over dropped months still answer from it. The work is SQL functions from
// migration 0006, run under a transaction-scoped advisory lock so instances take turns.
import { sql } from "drizzle-orm";
import type { Db } from "../store/db/client.ts";
import type { Base } from "../base.ts";
import { intervalJob, type Job } from "./job.ts";

/** Months created ahead of the current one. */
export const MONTHS_AHEAD = 2;
const INTERVAL_MS = 3600_000;
/** Advisory lock id of this job (any constant no other lock of the gateway uses). */
const LOCK = 7_300_412;

const firstOfMonth = (y: number, m: number) => new Date(Date.UTC(y, m, 1)).toISOString().slice(0, 10);

/** Months (first days, YYYY-MM-DD) whose partitions must exist at `now`. */
export function monthsAhead(now: Date): string[] {
  const out: string[] = [];
  for (let i = 0; i <= MONTHS_AHEAD; i++) out.push(firstOfMonth(now.getUTCFullYear(), now.getUTCMonth() + i));
  return out;
}

/** The cutoff of retention: partitions ending on or before this day hold only older records. */
export function retentionCutoff(now: Date, months: number): string {
  const d = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - months, now.getUTCDate()));
  // Day 31 in a shorter month rolls over; the earlier of the two keeps more, never less.
  if (d.getUTCDate() !== now.getUTCDate()) d.setUTCDate(0);
  return d.toISOString().slice(0, 10);
}

export interface PartitionRun { created: string[]; dropped: number }

/** One pass: creates the missing partitions, drops those retention lets go. */
export async function maintainUsagePartitions(db: Db, retentionMonths: number | undefined, now = new Date()): Promise<PartitionRun> {
  return db.transaction(async (tx) => {
    const t = tx as unknown as Db;
    await t.execute(sql`select pg_advisory_xact_lock(${LOCK})`);
    const created: string[] = [];
    for (const m of monthsAhead(now)) {
      const r = await t.execute<{ made: boolean }>(sql`select usage_ensure_partition(${m}::date) as made`);
      const rows = (Array.isArray(r) ? r : (r as { rows: Array<{ made: boolean }> }).rows);
      if (rows[0]?.made) created.push(m.slice(0, 7));
    }
    let dropped = 0;
    if (retentionMonths) {
      const r = await t.execute<{ n: number }>(sql`select usage_drop_partitions_before(${retentionCutoff(now, retentionMonths)}::date) as n`);
      const rows = (Array.isArray(r) ? r : (r as { rows: Array<{ n: number }> }).rows);
      dropped = Number(rows[0]?.n ?? 0);
    }
    return { created, dropped };
  });
}

export function usagePartitionsJob(ctx: Base): Job {
  return intervalJob(ctx, "usage-partitions", INTERVAL_MS, async () => {
    const r = await maintainUsagePartitions(ctx.db, ctx.config.USAGE_RETENTION_MONTHS);
    if (r.created.length || r.dropped) ctx.log.info({ job: "usage-partitions", created: r.created, dropped: r.dropped }, "usage partitions maintained");
  });
}
