/** Calendar month of a date in UTC, `YYYY-MM`: the scope of budget counters. */
export function monthKey(d: Date = new Date()): string {
  return d.toISOString().slice(0, 7);
}

/** Seconds from `d` until the start of the next UTC month (budget counter TTL, plus slack). */
export function secondsToMonthEnd(d: Date = new Date()): number {
  const next = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  return Math.ceil((next - d.getTime()) / 1000);
}

export function iso(d: Date | null | undefined): string | null {
  return d ? d.toISOString() : null;
}
