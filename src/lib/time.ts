// The current month, kept with the bounds it holds for: every admission asks for it (several
// times), and a Date plus toISOString each time was ~1 % of a request's JS time.
let current = { key: "", from: 0, until: 0 };

/** `current`, brought up to now (also when the clock stepped back). */
function thisMonth(): typeof current {
  const now = Date.now();
  if (now < current.from || now >= current.until) {
    const t = new Date(now);
    const y = t.getUTCFullYear(), m = t.getUTCMonth();
    current = { key: t.toISOString().slice(0, 7), from: Date.UTC(y, m, 1), until: Date.UTC(y, m + 1, 1) };
  }
  return current;
}

/** Calendar month of a date in UTC (now when none is given), `YYYY-MM`: the scope of budget counters. */
export function monthKey(d?: Date): string {
  return d ? d.toISOString().slice(0, 7) : thisMonth().key;
}

/** Seconds from `d` (now when none is given) until the start of the next UTC month (budget counter TTL, plus slack). */
export function secondsToMonthEnd(d?: Date): number {
  if (!d) return Math.ceil((thisMonth().until - Date.now()) / 1000);
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
