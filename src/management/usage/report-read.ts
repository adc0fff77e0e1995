// Reads of the usage reports, fenced so a slow or abandoned one cannot starve the rest of the
// database's users (management writes, cold routing-key reads): each runs in its own short
// transaction with a statement_timeout (the scan is cancelled by Postgres itself, not merely no
// longer awaited), and at most REPORT_CONCURRENCY of them hold a connection at once per instance.
import { sql } from "drizzle-orm";
import type { Db } from "../../store/db/client.ts";

/** Longest a report's statement may run before Postgres cancels it (SQLSTATE 57014). */
export const REPORT_STATEMENT_TIMEOUT_MS = 5000;
/** Report reads holding a connection at once; the pool has 10, the rest stay for everything else. */
export const REPORT_CONCURRENCY = 3;

let running = 0;
const waiting: Array<() => void> = [];

async function slot<T>(fn: () => Promise<T>): Promise<T> {
  if (running >= REPORT_CONCURRENCY) await new Promise<void>((r) => waiting.push(r));
  else running++;
  try {
    return await fn();
  } finally {
    const next = waiting.shift();
    if (next) next();
    else running--;
  }
}

/** Runs `fn` as a report read: one transaction, `SET LOCAL statement_timeout`, a bounded slot. */
export function reportRead<T>(db: Db, fn: (tx: Db) => Promise<T>, timeoutMs = REPORT_STATEMENT_TIMEOUT_MS): Promise<T> {
  return slot(() => db.transaction(async (tx) => {
    const t = tx as unknown as Db;
    await t.execute(sql.raw(`set local statement_timeout = ${Math.max(1, Math.floor(timeoutMs))}`));
    return fn(t);
  }));
}
