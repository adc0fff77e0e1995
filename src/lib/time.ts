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

/** `p`'s value, or null when it fails or takes longer than `ms` (whatever runs behind `p` goes on). */
export function within<T>(p: Promise<T>, ms: number): Promise<T | null> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms, null);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      () => {
        clearTimeout(timer);
        resolve(null);
      },
    );
  });
}
